// Alpa's strategy-selection problem: every node of a graph picks one of its strategies; a node's
// choice costs time (compute and the collectives it needs) and memory; an edge between two nodes
// costs the resharding between the producer's choice and the consumer's, or forbids the pair.
// Minimise the total time under a memory budget. Solved as Alpa does, as an integer linear
// program with one-hot node variables and linearised edge variables, by COIN-OR CBC; an exhaustive
// search solves small problems the same way (the tests' oracle, and builds without CBC).
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace slapo::plan {

struct SelectionProblem {
  struct Node {
    std::string name;
    std::vector<double> cost;    ///< seconds per strategy
    std::vector<double> memory;  ///< bytes per strategy (empty: none)
  };
  struct Edge {
    int from = 0, to = 0;
    /// seconds for each (from's strategy, to's strategy), row-major; INFINITY forbids the pair
    std::vector<double> cost;
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  double memory_budget = INFINITY;  ///< the chosen strategies' memory sums to at most this

  /// Adds a node and returns its index.
  int add_node(std::string name, std::vector<double> cost, std::vector<double> memory = {});
  /// The total cost of `choice` (INFINITY where a pair is forbidden or memory is over budget).
  double evaluate(const std::vector<int>& choice) const;
};

struct Selection {
  std::vector<int> choice;  ///< a strategy per node
  double cost = INFINITY;   ///< the objective; INFINITY when nothing is feasible
  bool feasible() const { return std::isfinite(cost); }
  std::string solver;       ///< "cbc" or "exhaustive"
  int variables = 0, constraints = 0;  ///< the ILP's size (0 for the exhaustive search)
};

/// True when this build links CBC.
bool have_ilp_solver();

/// Solves with CBC (an exhaustive search where the build has no CBC; it throws naming `who` when
/// the problem is too large for one). An infeasible problem comes back with cost INFINITY.
Selection solve_selection(const SelectionProblem& problem, const std::string& who);

/// Depth-first search over every choice, pruned by cost; throws naming `who` past `max_visits` nodes.
Selection solve_selection_exhaustively(const SelectionProblem& problem, const std::string& who,
                                       double max_visits = 2e7);

}  // namespace slapo::plan
