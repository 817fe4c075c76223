// The intra-op pass's first job: a module traced once, its projections (Linear, Conv1D) and
// dropouts kept as calls, and what the cost table (intra_op_costs.h) needs of the trace: each
// projection's input and output, the inputs shared by several projections, the token axes, what
// autograd saves, the parameters the graph reads. Kept between solves (IntraOpProblem).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/module.h"
#include "graph/traced_graph.h"
#include "plan/token_axes.h"

namespace slapo::plan {

struct Projection {
  std::string path, type;  // "Linear" or "Conv1D"
  int64_t in = 0, out = 0;
  bool bias = false, tied = false;
};

// Projections that read one input and sit below one module whose own input it is, with no other
// use of it inside that module: when they go column-parallel, one backward all-reduce on that
// module covers them all (Megatron's f before q, k and v).
struct SharedInput {
  std::string parent;                 // the module's path below the traced one
  std::vector<size_t> readers;        // indices into IntraOpAnalysis::projections
};

// The traced module and what the solver needs of it, kept between solves.
struct IntraOpAnalysis {
  std::shared_ptr<Module> module;                // the traced copy (the graph calls its leaves)
  std::shared_ptr<TracedGraph> graph;
  std::map<std::string, Projection> by_path;
  std::vector<Projection> projections;           // in graph order
  std::vector<const torch::jit::Value*> inputs;  // the value each projection reads
  std::vector<const torch::jit::Value*> outputs; // and the one it returns
  std::set<std::string> dropouts;                // the Dropout leaves' paths
  std::vector<SharedInput> shared;
  double example_tokens = 1;                     // tokens in the traced example
  int64_t example_seq = 0;                       // its sequence length
  int64_t token_axis = -1;                       // the input's sequence dimension (-1: none found)
  TokenAxes token_axes;                          // each value's, with the input split along it
  std::unordered_set<const torch::jit::Value*> saved;  // what autograd keeps for backward
  // graph inputs that are parameters: their paths ("ln_1.weight") and elements
  std::unordered_map<const torch::jit::Value*, std::pair<std::string, double>> params_of;
};

/// Ops that read a tensor without a gradient flowing back through them.
inline const std::set<std::string> kShapeOnly = {"aten::size", "aten::dim", "aten::len", "prim::shape",
                                                 "aten::numel"};

/// Traces `copy` (the caller no longer needs it) on inputs shaped like `example_inputs`. Raises
/// naming `where` when it has no projection or does not trace.
std::unique_ptr<IntraOpAnalysis> analyse_module(const std::shared_ptr<Module>& copy, const std::string& where,
                                                const Values& example_inputs);

}  // namespace slapo::plan
