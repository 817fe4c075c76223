// The planner's inter-op pass: Alpa's dynamic program over contiguous layer ranges x submeshes x
// intra-op choices (tensor x data parallel, checkpointing, ZeRO-1), minimising the 1F1B step
// (sum of the stage times + (micro-batches - 1) x the slowest) under each device's memory, for
// every micro-batch count that divides the batch. Beside it, Megatron's uniform grid, costed by
// the same model, as the baseline. No Lua; testable from C++ alone.
#pragma once

#include <vector>

#include "plan/cost_model.h"

namespace slapo::plan {

struct InterOpOptions {
  /// Every stage on one tp x dp mesh with one ZeRO setting, as one rank layout runs it; else each
  /// stage picks its own submesh (1, 2, 4 .. devices of a node, then whole nodes), as Alpa does.
  bool uniform_mesh = false;
  int max_stages = 0;  ///< 0: as many as the layers and devices allow
};

struct InterOpResult {
  Candidate candidate;
  Estimate estimate;
  int programs = 0;     ///< dynamic programs solved (one per bottleneck bound and micro-batch count)
  double seconds = 0;   ///< wall time of the search
};

/// The fastest plan that fits; throws naming the option when none does.
InterOpResult plan_inter_op(const ModelShape& model, const Cluster& cluster, const Workload& work,
                            const InterOpOptions& options = {});

/// Megatron-style uniform plans: TP (within a node, dividing the heads) x PP (equal layer counts)
/// x DP, every micro-batch count dividing the batch (the data-parallel ranks dividing each
/// micro-batch), checkpointing every layer or none, ZeRO-1 or not, and sequence parallelism where the pass prices
/// layers (ModelShape::sequence_parallel_on); a mixture of experts' experts over groups of ep
/// replicas for every ep dividing dp and the experts (not with ZeRO-1); from 16k tokens, each sequence
/// split over groups of cp replicas (context_parallel; in pipeline stages beside plain replicas only).
std::vector<Candidate> megatron_grid(const ModelShape& model, const Cluster& cluster, const Workload& work);

/// Raises, naming the setting and the numbers, where a plan a person names (plan_name.h) lies outside
/// what the planner prices and the plan script runs: its devices, layers and micro-batches, TP within a
/// node dividing the heads, dp dividing each micro-batch's rows, ep, cp, sequence parallelism and the
/// sharding on the stages that take them. Unlike the searches, it takes cp at any sequence length.
void check_named_plan(const ModelShape& model, const Cluster& cluster, const Workload& work, const Candidate& c);

/// Divisors of the batch: the micro-batch counts a step can be cut into.
std::vector<int> micro_batch_choices(int64_t batch);

}  // namespace slapo::plan
