// The intra-op pass's third job: the cost table (intra_op_costs.h) of the traced module
// (intra_op_analysis.h) solved as Alpa's ILP for each ZeRO choice, the layouts propagated once
// more through the solution to check it and to find where a projection's output is split, and the
// result returned as a record (intra_op_plan.h).
#include "plan/intra_op.h"

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "plan/intra_op_analysis.h"
#include "plan/intra_op_costs.h"
#include "plan/selection_ilp.h"

namespace slapo::plan {

using namespace intra;

IntraOpOptions intra_op_options(const Cluster& cluster, int tp, int dp, const std::string& dtype) {
  IntraOpOptions o;
  o.ranks = tp, o.dp = dp;
  const DeviceProfile& device = cluster.device;
  double seconds = device.matmul_seconds(4096, 4096, 4096, dtype);
  if (!(seconds > 0)) seconds = device.matmul_seconds(4096, 4096, 4096, device.matmul.front().dtype);
  o.flops_per_s = seconds > 0 ? 2.0 * 4096.0 * 4096.0 * 4096.0 / seconds : 1e12;
  o.bandwidth = cluster.intra_bw, o.latency = cluster.intra_latency;
  bool across = tp * dp > cluster.per_node;
  o.dp_bandwidth = across ? cluster.inter_bw : cluster.intra_bw;
  o.dp_latency = across ? cluster.inter_latency : cluster.intra_latency;
  o.zero_sync = zero_sync_all_reduces(device);
  return o;
}

IntraOpPlan plan_intra_op(const Module& module, const std::string& where, const Values& example_inputs,
                          const IntraOpOptions& options) {
  return plan_intra_op_of_copy(module.deep_clone(), where, example_inputs, options);
}

namespace {
void check_options(const IntraOpOptions& o, const std::string& where) {
  if (o.ranks < 2) throw Error(fmt::format("autoshard: {}: plan for 2 ranks or more, got {}", where, o.ranks));
  if (o.dp < 1) throw Error(fmt::format("autoshard: {}: dp must be 1 or more, got {}", where, o.dp));
}
}  // namespace

IntraOpPlan plan_intra_op_of_copy(const std::shared_ptr<Module>& copy, const std::string& where,
                                  const Values& example_inputs, const IntraOpOptions& o) {
  check_options(o, where);  // before the trace: a misspelt option costs nothing
  return IntraOpProblem(copy, where, example_inputs).solve(o);
}

IntraOpProblem::~IntraOpProblem() = default;

IntraOpProblem::IntraOpProblem(const std::shared_ptr<Module>& copy, const std::string& where,
                               const Values& example_inputs)
    : analysis_(analyse_module(copy, where, example_inputs)), where_(where) {}

IntraOpPlan IntraOpProblem::solve(const IntraOpOptions& o) const {
  const std::string& where = where_;
  check_options(o, where);
  const Analysis& a = *analysis_;
  if (o.sequence && a.token_axis < 0)
    throw Error(fmt::format("autoshard: {}: sequence parallelism splits the first input along its tokens, but it has "
                            "none to split (it takes a floating [batch, sequence, hidden] input of 2 tokens or more; "
                            "sequence = false keeps tensors whole)", where));
  std::vector<bool> zero_choices;
  if (o.zero != ZeroChoice::On || o.dp < 2) zero_choices.push_back(false);
  if (o.zero != ZeroChoice::Off && o.dp > 1) zero_choices.push_back(true);
  IntraOpPlan best;
  best.step_s = INFINITY;
  double least_bytes = INFINITY, solve_s = 0, best_objective = INFINITY;
  auto solve = [&](const SelectionProblem& problem) {
    return o.solver == Solver::Exhaustive ? solve_selection_exhaustively(problem, "autoshard: " + where)
                                          : solve_selection(problem, "autoshard: " + where);
  };
  for (bool zero : zero_choices) {
    Built b = build_problem(a, o, zero);
    b.problem.memory_budget = o.memory_bytes;
    if (!zero || o.zero == ZeroChoice::On) {  // no sharding at all (whole tensors in and out), for comparison
      IntraOpOptions whole_tensors = o;
      whole_tensors.sequence = false;
      Built rebuilt;  // only under sequence parallelism: else this problem has the whole layouts
      if (o.sequence) rebuilt = build_problem(a, whole_tensors, zero);
      const Built& whole = o.sequence ? rebuilt : b;
      best.replicated_s = best.replicated_memory_bytes = 0;
      for (auto& strategies : whole.strategies)
        best.replicated_s += strategies[0].seconds, best.replicated_memory_bytes += strategies[0].bytes;
    }
    auto solve_start = std::chrono::steady_clock::now();
    Selection s = solve(b.problem);
    solve_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - solve_start).count();
    if (!s.feasible()) {
      // the least memory any assignment needs, for the error: the same problem minimising bytes
      SelectionProblem bytes = b.problem;
      bytes.memory_budget = INFINITY;
      for (auto& n : bytes.nodes)
        for (size_t i = 0; i < n.cost.size(); ++i) n.cost[i] = std::isfinite(n.cost[i]) ? n.memory[i] : INFINITY;
      least_bytes = std::min(least_bytes, solve(bytes).cost);
      continue;
    }
    if (!(s.cost < best_objective - 1e-15)) continue;
    best_objective = s.cost, best.zero = zero, best.solver = s.solver;
    best.step_s = 0, best.volume = b.boundary_volume;
    best.variables = s.variables, best.constraints = s.constraints;
    best.projections = static_cast<int>(a.projections.size());
    best.ops = static_cast<int>(b.problem.nodes.size() - 1 - a.shared.size()) - best.projections;
    best.memory_bytes = 0;
    best.flops = best.split_flops = best.params = best.split_params = best.saved = best.split_saved = 0;
    best.forward_reduced_per_token = best.backward_reduced_per_token = 0;
    for (size_t v = 0; v < b.problem.nodes.size(); ++v) {
      best.memory_bytes += b.problem.nodes[v].memory[size_t(s.choice[v])];
      const Strategy& st = b.strategies[v][size_t(s.choice[v])];
      best.step_s += st.seconds, best.volume += st.volume;
      best.flops += st.flops, best.params += st.params, best.saved += st.saved;
      if (st.split && st.style != Style::TokenParallel && st.style != Style::TokenGather) best.split_params += st.params;
      if (st.split) best.split_flops += st.flops;
      if (st.split && (st.out == Layout::S || st.out == Layout::T)) best.split_saved += st.saved;
      best.forward_reduced_per_token += st.forward_reduced;
      best.backward_reduced_per_token += st.backward_reduced;
    }
    std::vector<Style> styles;
    for (size_t i = 0; i < a.projections.size(); ++i) {
      auto v = static_cast<size_t>(b.projection_node[i]);
      styles.push_back(b.strategies[v][static_cast<size_t>(s.choice[v])].style);
    }
    // the layouts propagated once more: a check of the solution, and where c_attn's parts are
    best.groups.clear(), best.forked.clear(), best.token_params.clear();
    best.sequence = o.sequence, best.token_axis = a.token_axis;
    if (!propagate(a, styles, best.sequence ? Layout::T : Layout::R, &best.groups, &best.forked, &best.token_params))
      throw std::logic_error("autoshard: the ILP's choice for " + where + " does not propagate");
    best.parent_syncs.clear(), best.parent_gathers.clear();
    for (size_t k = 0; k < a.shared.size(); ++k) {
      int chosen = s.choice[size_t(b.shared_node[k])];
      for (size_t r : a.shared[k].readers)
        if (chosen == 1) best.parent_syncs[a.projections[r].path] = a.shared[k].parent;
        else if (chosen == 2) best.parent_gathers[a.projections[r].path] = a.shared[k].parent;
    }
    best.strategy.clear();
    best.gather_axes.clear();
    for (size_t i = 0; i < styles.size(); ++i) {
      best.strategy[a.projections[i].path] = style_name(styles[i]);
      if (styles[i] == Style::TokenGather) best.gather_axes[a.projections[i].path] = a.token_axes.at(a.outputs[i]);
    }
  }
  if (!std::isfinite(best.step_s)) {
    if (std::isfinite(least_bytes))
      throw Error(fmt::format("autoshard: {} needs at least {:.1f} MiB per device on {} x {} ranks (tp x dp{}); "
                              "memory_mib is {:.3g}", where, least_bytes / double(1 << 20), o.ranks, o.dp,
                              zero_choices.back() ? ", ZeRO-1" : "", o.memory_bytes / double(1 << 20)));
    throw Error(fmt::format("autoshard: no assignment of {}'s {} projections is feasible", where, a.projections.size()));
  }
  best.solve_s = solve_s;
  for (auto& [path, proj] : a.by_path) {
    best.types[path] = proj.type;
    best.has_bias[path] = proj.bias;
  }
  return best;
}

}  // namespace slapo::plan
