// Choices made before the planner runs (a schedule's shard, cut_pipeline_stage, checkpoint and
// fully_shard calls, or `pin = {...}` given by hand): the search keeps them and fills in the rest,
// and the plan says what keeping them costs against the best plan without them. No Lua.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/cost_model.h"

namespace slapo::plan {

struct Pins {
  int tp = 0;                        ///< tensor-parallel size; 0: free
  bool tensor_parallel = false;      ///< tp >= 2, its size free (a shard on a one-rank schedule)
  int dp = 0;                        ///< data-parallel replicas per stage; 0: free
  int micro_batches = 0;             ///< 0: free
  std::vector<int> stage_layers;     ///< each pipeline stage's layer count; empty: free
  /// every layer checkpointed (true) or none (false); per stage when stage_checkpoint is given
  std::optional<bool> checkpoint;
  std::vector<bool> stage_checkpoint;  ///< with stage_layers: each stage's checkpointing
  std::optional<bool> zero, fully_sharded, keep_gathered, sequence;

  bool any() const;
  /// "tp 2, pp 2 (8+4 layers), checkpoint, fully sharded"
  std::string describe() const;
  /// Raises naming the pin when it cannot hold for this model at all (stage layer counts that do
  /// not add up to its layers, a per-stage list without stages, ZeRO-1 with fully sharded).
  void check(const ModelShape& model) const;
  /// Whether the plan keeps every pin as it is.
  bool kept_by(const Candidate& c, int layers) const;
  /// A uniform plan (Megatron's grid) reshaped to keep the pinned stage sizes and their
  /// checkpointing; none when it differs in a pin it cannot be reshaped to.
  std::optional<Candidate> reshape(const Candidate& c, int layers) const;
};

}  // namespace slapo::plan
