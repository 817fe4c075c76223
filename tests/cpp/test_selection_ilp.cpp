// The intra-op pass's solver: Alpa's selection ILP (CBC) against an exhaustive search over every
// choice, on random graphs with resharding costs, forbidden pairs and a memory budget.
#include <doctest/doctest.h>

#include <random>

#include "core/error.h"
#include "plan/selection_ilp.h"

using namespace slapo::plan;

namespace {

// A chain with skip edges (like a residual stream): `n` nodes of 1 to 4 strategies.
SelectionProblem random_problem(std::mt19937& rng, int n, double forbid_fraction, bool budget) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> strategies(1, 4);
  SelectionProblem p;
  double most_memory = 0;
  for (int v = 0; v < n; ++v) {
    int k = strategies(rng);
    std::vector<double> cost, memory;
    double heaviest = 0;
    for (int s = 0; s < k; ++s) {
      cost.push_back(unit(rng));
      memory.push_back(unit(rng) * 10);
      heaviest = std::max(heaviest, memory.back());
    }
    most_memory += heaviest;
    p.add_node("n" + std::to_string(v), cost, memory);
  }
  auto connect = [&](int u, int v) {
    SelectionProblem::Edge e{u, v, {}};
    size_t ku = p.nodes[size_t(u)].cost.size(), kv = p.nodes[size_t(v)].cost.size();
    for (size_t i = 0; i < ku * kv; ++i) {
      double r = unit(rng);
      e.cost.push_back(r < forbid_fraction ? INFINITY : r < 0.5 ? 0.0 : unit(rng) * 0.5);
    }
    p.edges.push_back(e);
  };
  for (int v = 1; v < n; ++v) {
    connect(v - 1, v);
    if (v >= 3 && unit(rng) < 0.4) connect(v - 3, v);
  }
  if (budget) p.memory_budget = 0.6 * most_memory;
  return p;
}

}  // namespace

TEST_CASE("selection ILP: equals the exhaustive search on random graphs") {
  std::mt19937 rng(7);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 60; ++trial) {
    auto p = random_problem(rng, 4 + trial % 7, trial % 3 == 0 ? 0.3 : 0.1, trial % 2 == 0);
    auto exact = solve_selection_exhaustively(p, "test");
    auto ilp = solve_selection(p, "test");
    CAPTURE(trial);
    REQUIRE(ilp.feasible() == exact.feasible());
    if (!exact.feasible()) {
      ++infeasible;
      continue;
    }
    ++feasible;
    CHECK(ilp.cost == doctest::Approx(exact.cost).epsilon(1e-9));
    CHECK(p.evaluate(ilp.choice) == doctest::Approx(ilp.cost));
  }
  CHECK(feasible > 30);  // the cases exercise both outcomes
  CHECK(infeasible > 0);
}

TEST_CASE("selection ILP: forbidden pairs, fixed nodes and the memory budget decide the choice") {
  SelectionProblem p;
  int input = p.add_node("input", {0.0});                          // one strategy: a constant
  int a = p.add_node("a", {1.0, 0.2}, {4.0, 8.0});                 // the fast strategy needs more memory
  int b = p.add_node("b", {1.0, 0.3}, {4.0, 8.0});
  p.edges.push_back({input, a, {0.0, 0.0}});
  p.edges.push_back({a, b, {0.0, INFINITY, INFINITY, 0.0}});       // a and b must agree
  auto free_choice = solve_selection(p, "test");
  CHECK(free_choice.choice == std::vector<int>{0, 1, 1});
  CHECK(free_choice.cost == doctest::Approx(0.5));
  p.memory_budget = 12;  // both fast strategies need 16 bytes; mixing them is forbidden
  auto tight = solve_selection(p, "test");
  CHECK(tight.choice == std::vector<int>{0, 0, 0});
  CHECK(tight.cost == doctest::Approx(2.0));
  p.memory_budget = 7;
  CHECK_FALSE(solve_selection(p, "test").feasible());
  CHECK_FALSE(solve_selection_exhaustively(p, "test").feasible());
  if (have_ilp_solver()) CHECK(free_choice.solver == "cbc");
}

TEST_CASE("selection ILP: the exhaustive search refuses problems past its limit, naming the caller") {
  std::mt19937 rng(3);
  auto p = random_problem(rng, 30, 0.0, false);
  for (auto& n : p.nodes) n.cost.assign(4, 1.0), n.memory.assign(4, 0.0);  // ties everywhere: no pruning
  for (auto& e : p.edges) e.cost.assign(p.nodes[size_t(e.from)].cost.size() * 4, 0.0);
  CHECK_THROWS_WITH_AS(solve_selection_exhaustively(p, "autoshard", 1000),
                       doctest::Contains("autoshard: the exhaustive search passed 1000 partial choices"),
                       slapo::Error);
}
