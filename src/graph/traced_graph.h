// A module traced into a TorchScript graph (the one place that knows TorchScript, so PyTorch 2.x
// builds can swap it): aten ops plus `slapo::call_module` nodes for leaf modules, the module's
// parameters as graph inputs, executed with autograd by a GraphFunction.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/module.h"

namespace torch::jit {
struct Graph;
struct GraphFunction;
}  // namespace torch::jit

namespace slapo {

/// A node as Lua sees it.
struct GraphNode {
  std::string op;       ///< "aten::matmul", "slapo::call_module", ...
  std::string name;     ///< the node's first output ("%x.3")
  std::string target;   ///< for call_module: the leaf's path below the traced module
  std::vector<std::string> inputs, users;
};

/// A module kept as one call in a trace: found through its parent's slot at run time, so a
/// later `replace` of the leaf takes effect in the graph.
struct TraceLeaf {
  std::shared_ptr<Module> parent;
  std::string slot;
  std::string path;  ///< below the traced module, for printing and find
};

class TracedGraph {
 public:
  TracedGraph(std::shared_ptr<torch::jit::Graph> graph, std::vector<at::Tensor> params,
              std::vector<std::vector<int64_t>> input_shapes, std::string where);
  ~TracedGraph();

  /// A copy with a graph of its own (the same parameter tensors): what a schedule snapshot keeps,
  /// since the subgraph primitives rewrite a graph in place.
  std::shared_ptr<TracedGraph> copy() const;
  /// Becomes `other` again, in place, so every module running this graph runs that one.
  void assign(const TracedGraph& other);

  /// Runs the graph on `args` (the traced module's inputs) with the module's parameters. A trace
  /// holds the example's sizes as constants, so other input shapes are refused, not miscomputed.
  Value run(const Values& args);
  std::string str() const;
  std::vector<GraphNode> nodes() const;
  /// The modules the graph's slapo::call_module nodes call now, once each, in graph order.
  std::vector<std::shared_ptr<Module>> called_leaves() const;
  /// The leaf ids of the graph's call nodes, in graph order (repeats included).
  std::vector<int64_t> leaf_call_ids() const;
  /// Points each call node whose leaf id is a key of `ids` at the id it maps to.
  void renumber_leaf_calls(const std::unordered_map<int64_t, int64_t>& ids);

  /// The subgraphs that match `pattern` (a traced pattern function) by dataflow: the same ops
  /// wired the same way, constants equal. Each match lists its nodes in graph order.
  /// `modules`: the pattern's functional activations (relu, silu, tanh, sigmoid) also match calls
  /// of leaves of the same module type (ReLU, ...), as Slapo's matcher does.
  std::vector<std::vector<GraphNode>> match(const TracedGraph& pattern, bool modules = false) const;

  /// Rewrites the kernel patterns of kernels.h into their fused ops (kernel_patterns() lists
  /// them: bias + GELU, masked softmax, the bias + dropout + residual + LayerNorm tail). Returns
  /// how many.
  /// `chosen`: the graph is a subgraph the user picked, so any add of a bias vector followed by
  /// GELU is fused, not only one right after a matmul.
  int fuse_kernels(bool chosen = false);

  /// Hands the graph to LibTorch's own optimiser: constant propagation, common subexpressions,
  /// peephole rewrites, dead code; at run time its profiling executor fuses what the build's
  /// fusers support (NNC / nvFuser on CUDA; nothing on a CPU build without LLVM, as Debian's).
  /// Returns how many nodes the passes removed.
  int optimize_torchscript();

  /// The subgraph of the nodes named `names` ("%x.3", as nodes() lists them) as a graph of its
  /// own: its inputs are the tensors those nodes read from outside, in order of first use; its
  /// outputs the values used after them, in graph order (a tuple when several). Raises naming
  /// `where` for unknown names or a non-tensor crossing the subgraph's border.
  std::shared_ptr<TracedGraph> extract(const std::vector<std::string>& names, const std::string& where,
                                       const char* caller = "subgraph") const;

  /// Replaces the nodes named `names` by one call of `leaf` with the inputs `extract` lists, in
  /// that order; its output (a tuple: its elements) stands for the subgraph's outputs. Nodes
  /// between the subgraph's nodes that use its outputs move after the call.
  void replace_with_leaf(const std::vector<std::string>& names, const TraceLeaf& leaf, const std::string& where);

  /// Input and output names of the subgraph `extract` would make ("%x.3"), for messages.
  std::vector<std::string> input_names() const;

  const std::shared_ptr<torch::jit::Graph>& graph() const { return graph_; }
  const std::vector<at::Tensor>& params() const { return params_; }
  /// Parameters the graph takes as inputs that were swapped for other tensors (build materialising
  /// a meta model): each one found in `replaced` (by its old TensorImpl) becomes its replacement.
  void swap_params(const std::unordered_map<const c10::TensorImpl*, at::Tensor>& replaced);
  const std::vector<std::vector<int64_t>>& input_shapes() const { return input_shapes_; }

 private:
  /// match's work for one form of the pattern: each match's nodes as indices into nodes().
  std::vector<std::vector<size_t>> match_variant(torch::jit::Graph& pattern) const;
  /// replace_with_leaf's rewrite, on `graph` (a copy of this one).
  void rewrite_with_leaf(torch::jit::Graph& graph, const std::vector<std::string>& names, const TraceLeaf& leaf,
                         const std::string& where);

  std::shared_ptr<torch::jit::Graph> graph_;
  std::vector<at::Tensor> params_;
  std::vector<std::vector<int64_t>> input_shapes_;
  std::string where_;
  std::vector<std::string> input_names_;  // for an extracted subgraph: its inputs' names outside
  std::unique_ptr<torch::jit::GraphFunction> function_;
};

/// Raises while a trace is being taken: `what` (Tensor:item, ...) reads a tensor's value into the
/// host, and a trace would keep that one value forever (torch.jit.trace's silent trap).
void refuse_value_read_while_tracing(const char* what);

/// In a pattern function: a call of any leaf whose path matches `regex` (slapo.pattern.call_module).
at::Tensor call_module_pattern(const std::string& regex, const std::vector<at::Tensor>& inputs);

/// Traces `fn` (a pattern such as `function(x, b) return F.gelu(x + b) end`) on example inputs.
std::shared_ptr<TracedGraph> trace_pattern(const std::function<Value(Values)>& fn, const Values& example_inputs);


/// The path (below the traced module) of the leaf a `slapo::call_module` node with this id calls.
std::string leaf_path(int64_t id);
/// The module a `slapo::call_module` node with this id calls now (the slot's current module), or
/// null when it is gone; `path_out` gets its path.
std::shared_ptr<Module> leaf_module(int64_t id, std::string* path_out = nullptr);
/// What fuse(compiler = "kernels") looks for, for messages; `chosen` as in fuse_kernels.
std::string kernel_patterns(bool chosen);
/// Registers a leaf for call nodes; returns its id.
int64_t register_leaf(const TraceLeaf& leaf);
/// Where call nodes with this id find their leaf (parent null when the id is unknown or its parent gone).
TraceLeaf leaf_place(int64_t id);
/// A new id for the call site `id` (its constant arguments kept) whose leaf now sits at `place`.
int64_t relocate_leaf(int64_t id, const TraceLeaf& place);

/// A module's call arguments from `values` whose last `keyword_names.size()` are keyword tensors:
/// the positional ones, then one table of keywords holding those (and the `constant` keywords).
Values with_keywords(const Values& values, const std::vector<std::string>& keyword_names,
                     const c10::optional<c10::impl::GenericDict>& constant);

/// Traces `module.forward` on `example_inputs`; `leaves` are recorded as single call nodes and
/// keep running their own forward. `keywords`, when given, is passed as the call's table of
/// keywords (constants of the trace, not inputs); a module that then returns a tuple of tensors
/// (Mixtral's logits and load-balancing loss) gives the graph one output each. `keyword_inputs`
/// names the last example inputs: each is passed as that keyword (position_ids, say) and stays a
/// graph input, in its place among the inputs. Raises slapo::Error naming `where` when the forward
/// reads a tensor's value as a number (a trace would bake that value in) or when the inputs are
/// not tensors.
std::shared_ptr<TracedGraph> trace_module(Module& module, const std::string& where, const Values& example_inputs,
                                          const std::vector<TraceLeaf>& leaves,
                                          const c10::optional<c10::impl::GenericDict>& keywords = c10::nullopt,
                                          const std::vector<std::string>& keyword_inputs = {});

}  // namespace slapo
