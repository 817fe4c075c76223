// The subgraph primitives: replace, checkpoint and fuse a chosen part of a traced module. Each
// moves the subgraph (or its replacement) into a new child that one call node runs.
#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "graph/graph_module.h"
#include "graph/traced_graph.h"
#include "primitives/primitives.h"
#include "primitives/rng.h"

namespace slapo {

namespace {

TracedGraph& traced_graph(Schedule& sch, const char* caller) {
  auto& graph = sch.mod()->meta().graph;
  if (!graph) throw Error(fmt::format("{}: {} is not traced; trace it, then find the subgraph", caller, sch.where()));
  return *graph;
}

// "<base>_<n>" with the first n no child of the module uses yet.
std::string fresh_child_name(const Module& m, const std::string& base) {
  for (int n = 0;; ++n) {
    std::string name = fmt::format("{}_{}", base, n);
    if (!m.has_child(name)) return name;
  }
}

std::string shapes_text(const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
                        const std::vector<size_t>& order) {
  std::vector<std::string> parts;
  for (auto i : order) parts.push_back(fmt::format("{} [{}]", names[i], fmt::join(shapes[i], ", ")));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::vector<at::Tensor> tensors_of(const Value& v) {
  if (v.isTensor()) return {v.toTensor()};
  std::vector<at::Tensor> out;
  if (v.isTuple())
    for (auto& e : v.toTupleRef().elements())
      if (e.isTensor()) out.push_back(e.toTensor());
  if (v.isList())
    for (const Value& e : v.toListRef())
      if (e.isTensor()) out.push_back(e.toTensor());
  return out;
}

// How far apart two results are (infinity when their shapes differ).
double distance(const Value& a, const Value& b) {
  auto x = tensors_of(a), y = tensors_of(b);
  if (x.size() != y.size() || x.empty()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].sizes() != y[i].sizes()) return INFINITY;
    auto scale = x[i].abs().max().item<double>() + 1e-12;
    worst = std::max(worst, (x[i].to(at::kDouble) - y[i].to(at::kDouble)).abs().max().item<double>() / scale);
  }
  return worst;
}

// Every module of the given trees in eval mode while alive; each one's own mode back afterwards
// (modules() lists parents before children, and train() on a parent recurses, so restoring in
// that order leaves each module as it was).
class EvalScope {
 public:
  explicit EvalScope(std::initializer_list<Module*> roots) {
    for (auto* root : roots)
      for (auto& m : root->modules(/*include_self=*/true)) modes_.emplace_back(m, m->is_training());
    for (auto* root : roots) root->eval();
  }
  ~EvalScope() {
    for (auto& [m, training] : modes_) m->train(training);
  }

 private:
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, bool>> modes_;
};

// Runs the subgraph and the replacement on the same random inputs (and random state); raises
// when they differ, naming an input order that would match. Both run in eval mode: dropout would
// make equal computations differ whenever the two draw their masks another way.
void check_same_results(TracedGraph& subgraph, Module& owner, Module& replacement, const std::string& where) {
  torch::NoGradGuard no_grad;
  EvalScope eval({&owner, &replacement});
  // The check draws random inputs and may run dropout: the caller's random streams (CPU, CUDA,
  // fork_rng) are as they were afterwards, whatever the outcome.
  auto before = RngSnapshot::capture(replacement);
  struct Restore {
    const RngSnapshot& snapshot;
    ~Restore() { snapshot.restore(); }
  } restore_after{before};
  auto names = subgraph.input_names();
  auto& shapes = subgraph.input_shapes();
  Values inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto type = subgraph.graph()->inputs()[i]->type()->cast<c10::TensorType>();
    auto dtype = type && type->scalarType() ? *type->scalarType() : at::kFloat;
    auto like = torch::TensorOptions().dtype(dtype).device(type && type->device() ? *type->device() : at::kCPU);
    inputs.emplace_back(at::isFloatingType(dtype) ? torch::randn(shapes[i], like) : torch::zeros(shapes[i], like));
  }
  auto rng = RngSnapshot::capture(replacement);
  Value expected = subgraph.run(inputs);
  // The replacement on the inputs in `order`, from the same random state; a failure gives None.
  auto run_replacement = [&](const std::vector<size_t>& order, std::string* error) -> Value {
    Values args;
    for (auto i : order) args.push_back(inputs[i]);
    rng.restore();
    try {
      return replacement(args);
    } catch (const std::exception& e) {
      if (error) *error = e.what();
      return Value();
    }
  };
  std::vector<size_t> order(inputs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::string first_error;
  Value got = run_replacement(order, &first_error);
  // A module made under init_empty_weights runs on the meta device: shapes without values, so only
  // the results' shapes can be compared here (slapo.verify materialises and compares the values).
  auto results = tensors_of(expected);
  bool shapes_only = std::any_of(results.begin(), results.end(), [](const at::Tensor& t) { return t.is_meta(); });
  if (shapes_only && first_error.empty()) {
    auto mine = tensors_of(got);
    bool same = mine.size() == results.size();
    for (size_t i = 0; same && i < mine.size(); ++i) same = mine[i].sizes() == results[i].sizes();
    if (same) return;
    throw Error(fmt::format("replace: the replacement for a subgraph of {} gives results of other shapes than the "
                            "subgraph on inputs like its own ({}); the module is on the meta device, so only shapes "
                            "are compared", where, shapes_text(names, shapes, order)));
  }
  if (first_error.empty() && distance(expected, got) <= 1e-4) return;
  // Which order of the inputs would give the subgraph's results?
  std::vector<size_t> perm = order;
  if (perm.size() <= 5 && !shapes_only)
    while (std::next_permutation(perm.begin(), perm.end()))
      if (distance(expected, run_replacement(perm, nullptr)) <= 1e-4)
        throw Error(fmt::format("replace: the replacement for a subgraph of {} matches it only with its arguments in "
                                "another order: it is called with {}, and gives the subgraph's results when called "
                                "with {}; reorder its parameters",
                                where, shapes_text(names, shapes, order), shapes_text(names, shapes, perm)));
  if (!first_error.empty())
    throw Error(fmt::format("replace: the replacement for a subgraph of {} failed on inputs like the subgraph's ({}): {}",
                            where, shapes_text(names, shapes, order), first_error));
  throw Error(fmt::format("replace: the replacement for a subgraph of {} gives other results than the subgraph on the "
                          "same inputs ({}; relative difference {:.3g}); pass {{check = false}} if that is intended",
                          where, shapes_text(names, shapes, order), distance(expected, got)));
}

// Puts `child` under `name` in the traced module and its call in place of the subgraph.
void install(Schedule& sch, TracedGraph& graph, const SubgraphNames& nodes, const std::string& name,
             std::shared_ptr<Module> child) {
  graph.replace_with_leaf(nodes, {sch.mod(), name, name}, sch.where());  // checks all before changing
  sch.mod()->set_child(name, std::move(child));  // the call node finds it through this slot at run time
  sch.refresh_children();
}

// The leaves the traced module's graph, and the graphs of wrappers already in it, still call.
std::vector<std::shared_ptr<Module>> leaves_called_outside(const Module& traced, const TracedGraph& graph,
                                                           const Module& wrapper) {
  auto out = graph.called_leaves();
  for (auto& [name, child] : traced.children_in_order()) {
    auto* other = dynamic_cast<GraphModule*>(child.get());
    if (!other || other == &wrapper) continue;
    for (auto& leaf : other->graph().called_leaves())
      if (!other->contains(leaf.get())) out.push_back(leaf);
  }
  return out;
}

std::string joined(const std::string& path, const std::string& name) { return path.empty() ? name : path + "." + name; }

// checkpoint and fuse own what they wrap (Slapo's CheckPointWrapper_0.layer1): each leaf the
// wrapper's graph calls moves into it at its path below the traced module, in PathHolders for
// the blocks above it, and the graph's calls follow it there. A leaf the rest of the traced
// graph also calls (a ReLU used twice) stays where it is, and the wrapper calls it there.
void move_called_leaves(Schedule& sch, const TracedGraph& graph, GraphModule& wrapper, const std::string& name) {
  auto outside = leaves_called_outside(*sch.mod(), graph, wrapper);
  std::unordered_map<const Module*, TraceLeaf> moved_to;
  std::unordered_map<int64_t, int64_t> renumbered;
  for (int64_t id : wrapper.graph().leaf_call_ids()) {
    if (renumbered.count(id)) continue;
    TraceLeaf from = leaf_place(id);
    auto leaf = from.parent && from.parent->has_child(from.slot) ? from.parent->child(from.slot) : nullptr;
    if (!leaf || std::find(outside.begin(), outside.end(), leaf) != outside.end()) continue;
    auto to = moved_to.find(leaf.get());
    if (to == moved_to.end()) {
      std::shared_ptr<Module> holder = std::dynamic_pointer_cast<Module>(wrapper.shared_from_this());
      size_t start = 0;
      for (size_t dot; (dot = from.path.find('.', start)) != std::string::npos; start = dot + 1) {
        std::string token = from.path.substr(start, dot - start);
        if (!holder->has_child(token)) holder->set_child(token, std::make_shared<PathHolder>());
        holder = holder->child(token);
      }
      std::string slot = from.path.substr(start);
      size_t index = from.parent->remove_child(from.slot);
      holder->set_child(slot, leaf);
      wrapper.meta().moved_leaves.push_back({from.path, index});
      sch.log().note_module_moved(joined(sch.path(), from.path), joined(joined(sch.path(), name), from.path));
      to = moved_to.emplace(leaf.get(), TraceLeaf{holder, slot, from.path}).first;
    }
    renumbered[id] = relocate_leaf(id, to->second);
  }
  wrapper.graph().renumber_leaf_calls(renumbered);
  sch.refresh_children();
}

// The hooks (syncs) of the leaves a replaced subgraph calls. Slapo's rule, made exact: a leaf's
// fwd_pre and bwd_post syncs transform its first input, so they move onto the new module when
// that input is the subgraph's first input and nothing else in the subgraph reads it; its
// fwd_post syncs transform its result, so they move when that result is the subgraph's only one.
// Anything else would change what the syncs see, and is refused before anything changes.
struct HookMove {
  std::shared_ptr<Module> leaf;
  std::string leaf_path;
  Module::Hooks hooks;
};

std::vector<HookMove> take_movable_hooks(Schedule& sch, const TracedGraph& graph, const TracedGraph& subgraph,
                                         const SubgraphNames& nodes) {
  auto inside = [&](const std::string& name) { return std::binary_search(nodes.begin(), nodes.end(), name); };
  auto all = graph.nodes();
  std::vector<const GraphNode*> chosen;
  for (auto& node : all)
    if (inside(node.name)) chosen.push_back(&node);
  // Values the subgraph gives back: one, or a tuple of them (TracedGraph::extract).
  auto* result = subgraph.graph()->outputs()[0]->node();
  size_t results = result->kind() == c10::prim::TupleConstruct ? result->inputs().size() : 1;
  // Users are named through the lists that carry values into calls: look at inputs instead.
  auto read_inside = [&](const std::string& value) {
    return std::any_of(chosen.begin(), chosen.end(), [&](const GraphNode* n) {
      return std::count(n->inputs.begin(), n->inputs.end(), value) > 0;
    });
  };
  auto first_input = subgraph.input_names().empty() ? std::string() : subgraph.input_names()[0];

  std::vector<std::pair<const GraphNode*, std::shared_ptr<Module>>> hooked;
  for (auto* node : chosen) {
    if (node->op != "slapo::call_module") continue;
    auto leaf = sch.at(node->target)->mod();
    if (leaf->hook_count() == 0) continue;
    auto refuse = [&](const std::string& why) {
      throw Error(fmt::format("replace: the subgraph of {} calls '{}', which has {} sync(s) or hook(s); {}. Replace "
                              "'{}' itself, or leave it out of the subgraph and sync the new module",
                              sch.where(), node->target, leaf->hook_count(), why, node->target));
    };
    if (leaf->pre_hook_count() > 0) {
      if (node->inputs.empty() || node->inputs[0] != first_input)
        refuse("its fwd_pre/bwd_post syncs move to the new module only when '" + node->target +
               "' reads the subgraph's first input");
      for (auto* other : chosen)
        if (other != node && std::count(other->inputs.begin(), other->inputs.end(), first_input))
          refuse("its fwd_pre/bwd_post syncs would also change what " + other->name + " reads");
    }
    if (leaf->post_hook_count() > 0) {
      if (read_inside(node->name) || node->users.empty() || results != 1)
        refuse("its fwd_post syncs move to the new module only when '" + node->target +
               "' gives the subgraph's only result");
    }
    hooked.emplace_back(node, leaf);
  }
  // (two leaves with input syncs cannot both pass: each would be the only reader of the first input)
  std::vector<HookMove> out;
  for (auto& [node, leaf] : hooked) out.push_back({leaf, sch.at(node->target)->path(), leaf->take_hooks()});
  return out;
}

// Puts moved hooks back on their leaves (the replace failed) or onto the new module.
void give_back(std::vector<HookMove>& moves) {
  for (auto& m : moves) m.leaf->give_hooks(std::move(m.hooks));
}
void give_to(std::vector<HookMove>& moves, Module& new_mod) {
  for (auto& m : moves) new_mod.give_hooks(std::move(m.hooks));
}

}  // namespace

std::string replace_subgraph(Schedule& sch, std::shared_ptr<Module> new_mod, const SubgraphNames& nodes, bool check,
                             const CallSite& site, const std::string& child_name) {
  auto& graph = traced_graph(sch, "replace");
  auto subgraph = graph.extract(nodes, sch.where(), "replace");  // checks the names and the border first
  // The check compares the computations without the syncs: they are off the leaves meanwhile.
  auto moves = take_movable_hooks(sch, graph, *subgraph, nodes);
  std::string name;
  try {
    if (check) check_same_results(*subgraph, *sch.mod(), *new_mod, sch.where());
    // one rule with fuse, and Slapo's: the name (else the type) and the first free _0, _1, ...
    name = fresh_child_name(*sch.mod(), child_name.empty() ? new_mod->type_name() : child_name);
    install(sch, graph, nodes, name, new_mod);
  } catch (...) {
    give_back(moves);
    throw;
  }
  give_to(moves, *new_mod);
  std::string new_path = sch.path().empty() ? name : sch.path() + "." + name;
  for (auto& m : moves) sch.log().note_syncs_moved(m.leaf_path, new_path);
  sch.log().append({"replace", sch.path(), site.lua_args, site.source});
  return name;
}

std::string checkpoint_subgraph(Schedule& sch, const SubgraphNames& nodes, const CallSite& site) {
  auto& graph = traced_graph(sch, "checkpoint");
  auto child = std::make_shared<GraphModule>("CheckPointWrapper", graph.extract(nodes, sch.where(), "checkpoint"));
  std::string name = fresh_child_name(*sch.mod(), "CheckPointWrapper");
  make_checkpointed(*child, fmt::format("'{}'", joined(sch.path(), name)));
  install(sch, graph, nodes, name, child);
  move_called_leaves(sch, graph, *child, name);
  sch.log().append({"checkpoint", sch.path(), site.lua_args, site.source});
  return name;
}

std::string fuse_subgraph(Schedule& sch, const SubgraphNames& nodes, const std::string& compiler,
                          const std::string& name, const CallSite& site) {
  auto& graph = traced_graph(sch, "fuse");
  if (compiler != "kernels" && compiler != "torchscript" && compiler != "none")
    throw Error(fmt::format("fuse: unknown compiler '{}' for {} (choices: kernels, torchscript, none)", compiler,
                            sch.where()));
  auto extracted = graph.extract(nodes, sch.where(), "fuse");
  if (compiler == "torchscript")
    extracted->optimize_torchscript();
  else if (compiler == "none")
    ;  // Slapo's fuse without a compiler: the nodes grouped into one module, nothing rewritten
  else if (extracted->fuse_kernels(/*chosen=*/true) == 0)
    throw Error(fmt::format("fuse: no kernel pattern in the chosen subgraph of {} (looked for: {})", sch.where(),
                            kernel_patterns(/*chosen=*/true)));
  std::string child_name = fresh_child_name(*sch.mod(), name);
  auto child = std::make_shared<GraphModule>(name, extracted);
  install(sch, graph, nodes, child_name, child);
  move_called_leaves(sch, graph, *child, child_name);
  sch.log().append({"fuse", sch.path(), site.lua_args, site.source});
  return child_name;
}

}  // namespace slapo
