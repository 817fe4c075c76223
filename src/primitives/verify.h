// build and verify: turn a schedule into a runnable model, and check a schedule against the
// unscheduled model on real inputs, outputs and gradients, across ranks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/schedule.h"

namespace slapo {

struct ScheduleBuildOptions {
  enum Init { Keep, All, None } init = Keep;
  uint64_t seed = 0;  ///< RNG seed of a full re-initialisation (identical on every rank)
  std::function<void(const std::string& path, std::shared_ptr<Module>)> init_fn;  ///< per module, when set
  /// Checkpoint slices read later (read_pretrained_slices, read_deferred_slices): a pipeline's,
  /// once its first trace has named this rank's stages.
  bool defer_checkpoint_reads = false;
};

/// The runnable model of a schedule. Keep: parameters keep their values (each rank its slice of
/// the same full tensor). All: HF-style initialisation at full size, then each rank's slice, so
/// TP=n starts from the weights TP=1 gets with the same seed. init_fn: called per module.
std::shared_ptr<Module> build(Schedule& sch, const ScheduleBuildOptions& options);

struct VerifyOptions {
  double rtol = 1e-5;
  /// Absolute tolerance; negative (the default) means 1e-5 x the reference's largest magnitude,
  /// because sharded sums add in another order and their float32 error grows with the values.
  double atol = -1;
  bool backward = true;
  bool train = false;  ///< compare in training mode (dropout on, same seed before each run)
  uint64_t seed = 0;
  /// Scheduled parameters that may lack a counterpart (by name) in the original model; any other
  /// such parameter is an error, since its gradient would go unchecked.
  std::vector<std::string> allow_missing;
  bool allow_any_missing = false;
};

/// What verify compared.
struct VerifyReport {
  int outputs = 0;          ///< output tensors compared
  int params = 0;           ///< the scheduled model's parameters (tied ones once)
  int gradients = 0;        ///< parameter gradients compared (sharded ones gathered first)
  int no_gradient = 0;      ///< parameters with a gradient in neither model (frozen or unused)
  int skipped_params = 0;   ///< scheduled parameters with no counterpart in the reference (allowed)
  std::vector<std::string> skipped;  ///< their names
  double max_output_diff = 0;
  double max_grad_diff = 0;
};

/// Runs `reference` (the unscheduled model) and the schedule's model on `inputs` (made identical
/// on every rank first) and raises slapo::Error on the first mismatch: which output or
/// gradient, by how much, and the first module (by path) whose output differs.
VerifyReport verify_against(Schedule& sch, Module& reference, Values inputs, const VerifyOptions& options);

}  // namespace slapo
