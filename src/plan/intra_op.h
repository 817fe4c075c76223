// The planner's intra-op pass, first form: for one traced layer on a 1-D mesh of `ranks`, choose
// for every projection (Linear, Conv1D) replicated, column- or row-parallel so that the layer's
// other ops see layouts they can compute on, at the least predicted time (compute shared by the
// ranks plus the all-reduces each choice needs). Solved exactly by enumeration (3^n for n
// projections); the plan comes back as Lua: shard and sync calls on the layer's leaves.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/module.h"

namespace slapo::plan {

struct IntraOpOptions {
  int ranks = 2;
  double tokens = 4096;       ///< tokens per step on a replica (batch x sequence)
  double flops_per_s = 1e14;  ///< the device's matmul throughput
  double bandwidth = 4.5e11;  ///< bytes/s and seconds of the mesh's links (ring all-reduce)
  double latency = 5e-6;
  double bytes_per_element = 4;
};

struct IntraOpPlan {
  std::map<std::string, std::string> strategy;  ///< leaf path below the layer -> "replicated" | "column" | "row"
  std::map<std::string, int> groups;            ///< column leaves whose output is split into parts (GPT-2's c_attn)
  std::map<std::string, std::string> types;     ///< leaf path -> "Linear" | "Conv1D"
  std::map<std::string, bool> has_bias;
  double step_s = 0, replicated_s = 0;          ///< predicted time of the plan and of no sharding
  int feasible = 0, considered = 0;
  /// `return function(sch) ... end`: the shard and sync calls, `sch` being the layer's schedule.
  std::string lua_source() const;
};

/// Traces a copy of `layer` (flattened, projections and dropouts kept as calls) on inputs shaped
/// like `example_inputs` and solves it. Raises naming `where` when the layer has no projection
/// or no assignment is feasible.
IntraOpPlan plan_intra_op(const Module& layer, const std::string& where, const Values& example_inputs,
                          const IntraOpOptions& options);

}  // namespace slapo::plan
