// The intra-op pass as the planner's search sees it: one layer of the model, built at full width
// (uninitialised, a small vocabulary), run once and traced alone, then Alpa's ILP solved on it for
// every tp x dp mesh the search prices. Its layouts replace Megatron's in the cost model, and the
// chosen plan's layout becomes the plan script's shard_layer.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "models/config.h"
#include "plan/cost_model.h"
#include "plan/intra_op.h"

namespace slapo::plan {

class PassLayouts : public LayerLayouts {
 public:
  /// Builds, runs and traces one layer; raises (an Error) when any of that fails.
  PassLayouts(const ModelConfig& config, const ModelShape& shape, const Cluster& cluster, const Workload& work);
  /// The pass's layout for a step of the workload on tp x dp ranks (ZeRO-1 off), solved once.
  TpLayout on(int tp, int dp, bool sequence) const override;
  /// The plan behind on(tp, dp, sequence), whole: the calls the plan script makes on each layer.
  IntraOpPlan plan_for(int tp, int dp, bool sequence) const;
  /// The layer's path in the model, which the plan's calls are relative to ("transformer.h.0").
  const std::string& layer() const { return layer_; }
  double trace_s() const { return trace_s_; }

 private:
  IntraOpOptions options(int tp, int dp, bool sequence) const;
  Cluster cluster_;
  Workload work_;
  int64_t hidden_;
  std::string layer_;
  std::unique_ptr<IntraOpProblem> problem_;
  double trace_s_ = 0;
  // Each mesh's solution, once: the search's layouts and the chosen plan's script come from it.
  struct Solved {
    std::optional<IntraOpPlan> plan;  // none: the solve raised
    TpLayout layout = TpLayout::megatron();
  };
  const Solved& solved(int tp, int dp, bool sequence) const;  // with mutex_ held
  mutable std::mutex mutex_;  // the search's threads share the solutions and the solver
  mutable std::map<std::tuple<int, int, bool>, Solved> solved_;
};

/// What prices the layers' tensor parallelism: "ilp" (the pass, when the cluster has a node of 2
/// devices or more and the layer traces) or "megatron" (Megatron's layout everywhere). `note`
/// says which, and why the pass was not used. Checks the workload first (check_workload,
/// check_positions).
struct LayerPricing {
  std::shared_ptr<const PassLayouts> layouts;
  std::string note;
};
LayerPricing price_layers(const std::string& how, const ModelConfig& config, const ModelShape& shape,
                          const Cluster& cluster, const Workload& work);

}  // namespace slapo::plan
