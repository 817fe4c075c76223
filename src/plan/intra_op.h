// The planner's intra-op pass: for a traced module (one layer, or a whole model) on a 2-D mesh of
// `ranks` tensor-parallel x `dp` data-parallel devices, choose for every projection (Linear,
// Conv1D) replicated, column- or row-parallel, and for every other op whether it computes on whole
// or head-split tensors, so that each op sees layouts it can compute on, at the least predicted
// time (compute shared by the ranks, the all-reduces each choice needs over the tensor-parallel
// axis, the gradient all-reduce over the data-parallel axis), under a memory budget per device,
// with or without ZeRO-1's sharded optimizer state. Solved as Alpa's ILP (selection_ilp.h); the
// plan comes back as a record (intra_op_plan.h), which stdlib/slapo/layer_layout.lua writes as
// shard and sync calls on the module's leaves.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/module.h"
#include "plan/cost_model.h"
#include "plan/intra_op_plan.h"

namespace slapo::plan {

enum class ZeroChoice { Auto, On, Off };  ///< ZeRO-1: the solver chooses, always, never
enum class Solver { Ilp, Exhaustive };
enum class Objective { Time, Volume };

struct IntraOpOptions {
  int ranks = 2;              ///< the tensor-parallel axis of the mesh
  int dp = 1;                 ///< the data-parallel axis: replicas the batch is split over
  double tokens = 4096;       ///< tokens per step over all replicas (batch x sequence)
  /// the sequence length those tokens come in: attention's scores grow with its square (0: the
  /// example's, every tensor grows with the tokens alone)
  double seq = 0;
  double flops_per_s = 1e14;  ///< the device's matmul throughput
  double bandwidth = 4.5e11;  ///< bytes/s and seconds of the tensor-parallel axis's links (ring all-reduce)
  double latency = 5e-6;
  double dp_bandwidth = 4.5e11, dp_latency = 5e-6;  ///< the data-parallel axis's links
  double bytes_per_element = 4;
  double memory_bytes = INFINITY;  ///< per device: parameters, gradients, AdamW state and saved activations
  /// ZeRO-1 (AdamW's moments sharded over the data-parallel axis): Auto lets the solver choose
  ZeroChoice zero = ZeroChoice::Auto;
  double zero_sync = 1.5;  ///< ZeRO-1's gradient sync in all-reduces (cost_model.h's zero_sync_all_reduces)
  /// Ilp: CBC where the build has it; Exhaustive: the depth-first search (a cross-check, and
  /// what a build without CBC uses)
  Solver solver = Solver::Ilp;
  /// Sequence parallelism: true: the module's input arrives split over the tensor-parallel ranks
  /// along the tokens and its output leaves so (Megatron's sequence parallelism between layers);
  /// token-wise ops (norms, dropout, residual adds) may then run on each rank's tokens, and
  /// projections may gather the tokens (column) or reduce-scatter them (row), or keep whole
  /// weights on this rank's tokens. false: whole tensors in and out.
  bool sequence = false;
  /// Time: the predicted step (compute, every collective, weight-gradient syncs) under the
  /// memory budget. Volume: Slapo's solver's objective, the elements each rank hands the forward
  /// pass's collectives (an all-reduce or a reduce-scatter its whole tensor, an all-gather its
  /// part; under sequence parallelism one more per op reading the split input), the predicted time
  /// breaking ties.
  Objective objective = Objective::Time;
};


/// Options for a `tp` x `dp` mesh of `cluster`: the device's matmul throughput in `dtype` (its first
/// profiled dtype when it has no rows for that one), tensor parallelism on the node's links, data
/// parallelism across nodes once the mesh outgrows one, ZeRO-1's sync as the device runs it.
IntraOpOptions intra_op_options(const Cluster& cluster, int tp, int dp, const std::string& dtype);

/// The module at dotted `path` below `root` ("transformer.h.0"), or null.
std::shared_ptr<Module> module_at(const std::shared_ptr<Module>& root, const std::string& path);

struct IntraOpAnalysis;

/// A module traced once and solved for as many meshes as asked (the planner prices every tp x dp
/// of its search with one layer's trace). Traces `copy` as it is: the caller no longer needs it.
class IntraOpProblem {
 public:
  /// Raises naming `where` when the module has no projection or does not trace.
  IntraOpProblem(const std::shared_ptr<Module>& copy, const std::string& where, const Values& example_inputs);
  ~IntraOpProblem();
  /// Raises naming `where` when no assignment fits (the memory it would need at least).
  IntraOpPlan solve(const IntraOpOptions& options) const;

 private:
  std::unique_ptr<IntraOpAnalysis> analysis_;
  std::string where_;
};

/// Traces a copy of `module` (flattened, projections and dropouts kept as calls) on inputs shaped
/// like `example_inputs` and solves it. Raises naming `where` when the module has no projection or
/// no assignment fits (the memory it would need at least).
IntraOpPlan plan_intra_op(const Module& module, const std::string& where, const Values& example_inputs,
                          const IntraOpOptions& options);

/// The same on a module the caller no longer needs (the planner's one-layer model): traced as it
/// is, without a copy.
IntraOpPlan plan_intra_op_of_copy(const std::shared_ptr<Module>& copy, const std::string& where,
                                  const Values& example_inputs, const IntraOpOptions& options);

}  // namespace slapo::plan
