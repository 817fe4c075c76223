// The selection problem as Alpa's ILP (ALPA.md section 2: one-hot s_v, edge variables e_uv for the
// resharding costs, forbidden pairs as s_u[i] + s_v[j] <= 1, one memory row), solved by CBC.
#include "plan/selection_ilp.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>

#include "core/error.h"

#ifndef SLAPO_WITH_CBC  // CMake sets it on this file alone (SLAPO_CBC)
#define SLAPO_WITH_CBC 0
#endif
#if SLAPO_WITH_CBC
#include <Cbc_C_Interface.h>
#endif

namespace slapo::plan {

int SelectionProblem::add_node(std::string name, std::vector<double> cost, std::vector<double> memory) {
  if (!memory.empty() && memory.size() != cost.size())
    throw std::logic_error("SelectionProblem::add_node: one memory per strategy");
  nodes.push_back({std::move(name), std::move(cost), std::move(memory)});
  return static_cast<int>(nodes.size()) - 1;
}

double SelectionProblem::evaluate(const std::vector<int>& choice) const {
  double total = 0, bytes = 0;
  for (size_t v = 0; v < nodes.size(); ++v) {
    total += nodes[v].cost[static_cast<size_t>(choice[v])];
    if (!nodes[v].memory.empty()) bytes += nodes[v].memory[static_cast<size_t>(choice[v])];
  }
  for (auto& e : edges) {
    size_t k = nodes[static_cast<size_t>(e.to)].cost.size();
    total += e.cost[static_cast<size_t>(choice[static_cast<size_t>(e.from)]) * k +
                    static_cast<size_t>(choice[static_cast<size_t>(e.to)])];
  }
  return bytes > memory_budget ? INFINITY : total;
}

namespace {

double memory_of(const SelectionProblem::Node& n, size_t s) { return n.memory.empty() ? 0.0 : n.memory[s]; }

void check_shapes(const SelectionProblem& p) {
  for (auto& n : p.nodes)
    if (n.cost.empty()) throw std::logic_error("SelectionProblem: node '" + n.name + "' has no strategy");
  for (auto& e : p.edges) {
    auto bad = [&](int v) { return v < 0 || static_cast<size_t>(v) >= p.nodes.size(); };
    if (bad(e.from) || bad(e.to) || e.from == e.to ||
        e.cost.size() != p.nodes[static_cast<size_t>(e.from)].cost.size() * p.nodes[static_cast<size_t>(e.to)].cost.size())
      throw std::logic_error("SelectionProblem: an edge's endpoints or cost matrix do not fit its nodes");
  }
}

}  // namespace

Selection solve_selection_exhaustively(const SelectionProblem& p, const std::string& who, double max_visits) {
  check_shapes(p);
  const size_t n = p.nodes.size();
  // the edges each node closes: those whose other end comes earlier in the order
  std::vector<std::vector<const SelectionProblem::Edge*>> closes(n);
  for (auto& e : p.edges) closes[static_cast<size_t>(std::max(e.from, e.to))].push_back(&e);
  // the least memory the nodes after each position still need, for pruning
  std::vector<double> min_memory_after(n + 1, 0.0);
  for (size_t v = n; v-- > 0;) {
    double least = INFINITY;
    for (size_t s = 0; s < p.nodes[v].cost.size(); ++s) least = std::min(least, memory_of(p.nodes[v], s));
    min_memory_after[v] = min_memory_after[v + 1] + least;
  }
  Selection best;
  best.solver = "exhaustive";
  std::vector<int> choice(n, 0);
  double visits = 0;
  std::function<void(size_t, double, double)> visit = [&](size_t v, double cost, double bytes) {
    if (v == n) {
      if (cost < best.cost) best.cost = cost, best.choice = choice;
      return;
    }
    if (++visits > max_visits)
      throw Error(fmt::format("{}: the exhaustive search passed {:.0f} partial choices over {} nodes; it is for "
                              "layer-sized problems, the ILP solver for larger ones (solver = \"ilp\" in a build "
                              "with CBC: coinor-libcbc-dev)", who, max_visits, n));
    auto& node = p.nodes[v];
    for (size_t s = 0; s < node.cost.size(); ++s) {
      choice[v] = static_cast<int>(s);
      double c = cost + node.cost[s];
      for (auto* e : closes[v]) {
        size_t k = p.nodes[static_cast<size_t>(e->to)].cost.size();
        c += e->cost[static_cast<size_t>(choice[static_cast<size_t>(e->from)]) * k +
                     static_cast<size_t>(choice[static_cast<size_t>(e->to)])];
      }
      double b = bytes + memory_of(node, s);
      if (!(c < best.cost) || b + min_memory_after[v + 1] > p.memory_budget) continue;  // costs are never negative
      visit(v + 1, c, b);
    }
  };
  visit(0, 0.0, 0.0);
  return best;
}

bool have_ilp_solver() { return SLAPO_WITH_CBC != 0; }

#if SLAPO_WITH_CBC
namespace {

// The ILP over the nodes with more than one strategy; single-strategy nodes fold into constants and
// their edges into the other end's costs.
Selection solve_with_cbc(const SelectionProblem& p) {
  const size_t n = p.nodes.size();
  std::vector<std::vector<double>> cost(n);
  std::vector<std::vector<bool>> allowed(n);
  for (size_t v = 0; v < n; ++v) {
    cost[v] = p.nodes[v].cost;
    allowed[v].assign(cost[v].size(), true);
    for (size_t s = 0; s < cost[v].size(); ++s)
      if (!std::isfinite(cost[v][s])) allowed[v][s] = false;
  }
  auto fixed = [&](size_t v) { return p.nodes[v].cost.size() == 1; };
  double constant = 0, fixed_bytes = 0;
  for (size_t v = 0; v < n; ++v)
    if (fixed(v)) constant += cost[v][0], fixed_bytes += memory_of(p.nodes[v], 0);
  Selection out;
  out.solver = "cbc";
  std::vector<const SelectionProblem::Edge*> free_edges;
  for (auto& e : p.edges) {
    auto u = static_cast<size_t>(e.from), v = static_cast<size_t>(e.to);
    size_t k = cost[v].size();
    if (fixed(u) && fixed(v)) {
      constant += e.cost[0];
    } else if (fixed(u) || fixed(v)) {
      size_t other = fixed(u) ? v : u;
      for (size_t s = 0; s < cost[other].size(); ++s) {
        double c = fixed(u) ? e.cost[s] : e.cost[s * k];
        if (std::isfinite(c)) cost[other][s] += c;
        else allowed[other][s] = false;
      }
    } else {
      free_edges.push_back(&e);
    }
  }
  if (!std::isfinite(constant)) return out;  // two fixed nodes that cannot meet

  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_setLogLevel(model.get(), 0);
  // proven optimal, not within CBC's default gap: two plans can differ by nanoseconds
  Cbc_setAllowableGap(model.get(), 0.0);
  Cbc_setAllowableFractionGap(model.get(), 0.0);
  int columns = 0;
  auto add_column = [&](double objective, bool may_be_one) {
    // in microseconds: seconds put whole plans' differences under the solver's tolerances
    Cbc_addCol(model.get(), "", 0.0, may_be_one ? 1.0 : 0.0, objective * 1e6, 1, 0, nullptr, nullptr);
    return columns++;
  };
  std::vector<std::vector<int>> s(n);  // node v's strategy s -> its column
  std::vector<int> memory_columns;
  std::vector<double> memory_coefficients;
  for (size_t v = 0; v < n; ++v) {
    if (fixed(v)) continue;
    std::vector<int> row;
    for (size_t i = 0; i < cost[v].size(); ++i) {
      s[v].push_back(add_column(allowed[v][i] ? cost[v][i] : 0.0, allowed[v][i]));
      row.push_back(s[v].back());
      if (memory_of(p.nodes[v], i) != 0) {
        memory_columns.push_back(s[v].back());
        memory_coefficients.push_back(memory_of(p.nodes[v], i));
      }
    }
    std::vector<double> ones(row.size(), 1.0);
    Cbc_addRow(model.get(), "", static_cast<int>(row.size()), row.data(), ones.data(), 'E', 1.0);  // (b)
  }
  for (auto* e : free_edges) {
    auto u = static_cast<size_t>(e->from), v = static_cast<size_t>(e->to);
    size_t ku = cost[u].size(), kv = cost[v].size();
    bool costs = false;
    for (double c : e->cost) costs |= std::isfinite(c) && c != 0;
    if (!costs) {  // (h): forbidden pairs only
      for (size_t i = 0; i < ku; ++i)
        for (size_t j = 0; j < kv; ++j)
          if (!std::isfinite(e->cost[i * kv + j])) {
            int cols[2] = {s[u][i], s[v][j]};
            double ones[2] = {1.0, 1.0};
            Cbc_addRow(model.get(), "", 2, cols, ones, 'L', 1.0);
          }
      continue;
    }
    // e_uv over the allowed pairs: (e) one pair, (f) and (g) consistent with s_u and s_v
    std::vector<std::vector<int>> by_row(ku), by_col(kv);
    std::vector<int> all;
    for (size_t i = 0; i < ku; ++i)
      for (size_t j = 0; j < kv; ++j) {
        double c = e->cost[i * kv + j];
        if (!std::isfinite(c)) continue;
        int col = add_column(c, true);
        by_row[i].push_back(col), by_col[j].push_back(col), all.push_back(col);
      }
    std::vector<double> ones(all.size(), 1.0);
    Cbc_addRow(model.get(), "", static_cast<int>(all.size()), all.data(), ones.data(), 'E', 1.0);
    auto marginal = [&](std::vector<int> cols, int strategy_column) {
      std::vector<double> coefficients(cols.size(), 1.0);
      cols.push_back(strategy_column), coefficients.push_back(-1.0);
      Cbc_addRow(model.get(), "", static_cast<int>(cols.size()), cols.data(), coefficients.data(), 'L', 0.0);
    };
    for (size_t i = 0; i < ku; ++i) marginal(by_row[i], s[u][i]);
    for (size_t j = 0; j < kv; ++j) marginal(by_col[j], s[v][j]);
  }
  if (std::isfinite(p.memory_budget) && !memory_columns.empty())  // (c), without liveness: all held at once
    Cbc_addRow(model.get(), "", static_cast<int>(memory_columns.size()), memory_columns.data(),
               memory_coefficients.data(), 'L', p.memory_budget - fixed_bytes);
  else if (fixed_bytes > p.memory_budget)
    return out;
  out.variables = columns;
  out.constraints = Cbc_getNumRows(model.get());
  if (columns == 0) {  // every node fixed
    out.choice.assign(n, 0);
    out.cost = p.evaluate(out.choice);
    return out;
  }
  Cbc_solve(model.get());
  if (!Cbc_isProvenOptimal(model.get())) return out;
  const double* x = Cbc_getColSolution(model.get());
  out.choice.assign(n, 0);
  for (size_t v = 0; v < n; ++v)
    for (size_t i = 0; i < s[v].size(); ++i)
      if (x[s[v][i]] > 0.5) out.choice[v] = static_cast<int>(i);
  out.cost = p.evaluate(out.choice);  // the objective, recomputed from the choice itself
  return out;
}

}  // namespace
#endif

Selection solve_selection(const SelectionProblem& problem, const std::string& who) {
#if SLAPO_WITH_CBC
  (void)who;
  check_shapes(problem);
  return solve_with_cbc(problem);
#else
  return solve_selection_exhaustively(problem, who);
#endif
}

}  // namespace slapo::plan
