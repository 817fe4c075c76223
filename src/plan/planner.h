// The planner's first pass: every uniform Megatron-style plan (TP x DP, checkpointing, ZeRO-1)
// costed by the model in cost_model.h, the fastest that fits chosen, and the plan written as a
// Lua schedule script a person reads, edits and runs with `slapo-lua run --nproc N`.
#pragma once

#include <string>
#include <vector>

#include "plan/cost_model.h"

namespace slapo::plan {

struct Ranked {
  Candidate candidate;
  Estimate estimate;
  std::string verdict;  ///< "chosen", or why it lost
};

struct Plan {
  ModelShape model;
  /// The plan script's `model` field: a quoted preset name or directory (default), or a Lua
  /// table of config fields for a model built from a config.
  std::string model_source;
  Cluster cluster;
  Workload work;
  std::vector<Ranked> ranked;  ///< the chosen plan first, then the others by predicted step time
  const Ranked& chosen() const { return ranked.front(); }
  /// A Lua script that builds the model, applies the plan with the reference schedules, checks it
  /// and trains `steps` steps; comments give the prediction and the alternatives.
  std::string lua_source(int steps) const;
  /// The table `slapo-lua plan` prints.
  std::string summary() const;
};

/// Enumerates the uniform plans for `cluster`: TP within a node dividing the heads (and key/value
/// heads), DP over the rest dividing the batch; throws naming the option when none fits (by how
/// much memory the most sharded one misses).
Plan plan_uniform(const ModelShape& model, const Cluster& cluster, const Workload& work);

}  // namespace slapo::plan
