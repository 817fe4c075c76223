// trace: turn a module's forward into a graph; its leaves stay calls that sch["..."] reaches.
#include <algorithm>
#include <regex>

#include "core/error.h"
#include "graph/traced_graph.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

// flatten = false: the direct children are the leaves. flatten = true: the descendants named in
// `leaves` (paths below the module, or type names) are, and every Dropout.
std::vector<TraceLeaf> choose_leaves(Schedule& sch, const std::vector<std::string>& names, bool flatten) {
  std::vector<TraceLeaf> out;
  if (!flatten) {  // every direct child is a leaf; named leaves must still exist
    for (auto& name : names) {
      bool found = false;
      for (auto& [path, node] : sch.named_schedules()) found |= name == path || name == node->mod()->type_name();
      if (!found)
        throw Error(fmt::format("trace: leaf '{}' is neither a path below {} nor the type of a module there", name,
                                sch.where()));
    }
    for (auto& child : sch.children()) out.push_back({sch.mod(), child->name(), child->name()});
    return out;
  }
  std::vector<bool> used(names.size(), false);
  auto under_leaf = [&](const std::string& path) {
    for (auto& leaf : out)
      if (path.rfind(leaf.path + ".", 0) == 0) return true;
    return false;
  };
  for (auto& [path, node] : sch.named_schedules()) {
    if (under_leaf(path)) continue;
    bool chosen = false;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == path || names[i] == node->mod()->type_name()) {
        used[i] = chosen = true;
        break;
      }
    }
    // Dropout switches on train/eval at call time; traced, that switch would be frozen.
    if (chosen || node->mod()->type_name() == "Dropout") out.push_back({node->parent()->mod(), node->name(), path});
  }
  for (size_t i = 0; i < names.size(); ++i)
    if (!used[i])
      throw Error(fmt::format("trace: leaf '{}' is neither a path below {} nor the type of a module there", names[i],
                              sch.where()));
  return out;
}

}  // namespace

namespace {

void trace_one(Schedule& sch, const Values& inputs, const std::vector<std::string>& leaves, bool flatten) {
  Module& m = *sch.mod();
  if (m.meta().graph) throw Error(fmt::format("trace: {} ({}) is traced already", sch.where(), m.type_name()));
  // without inputs, ones like the module's last call: trailing None arguments are left out, as
  // Slapo's concrete_args bake None in, and calls must pass None there (checked below)
  Values examples = inputs.empty() ? examples_like_last_call(m, sch.where(), "trace", "trace{inputs = {x, ...}}")
                                   : inputs;
  auto chosen = choose_leaves(sch, leaves, flatten);
  auto graph = trace_module(m, sch.where(), examples, chosen);
  m.meta().graph = graph;
  size_t traced_args = examples.size();
  std::string where = sch.where();
  m.set_forward_override([graph, traced_args, where](Values args) {
    for (size_t i = traced_args; i < args.size(); ++i)
      if (!args[i].isNone())
        throw Error(fmt::format("traced {}: argument {} is a {}, but the trace was taken without it (as None); trace "
                                "it again with trace{{inputs = {{...}}}} giving that argument",
                                where, i + 1, args[i].tagKind()));
    if (args.size() > traced_args) args.resize(traced_args);
    return graph->run(args);
  });
}

void untrace(Module& m) {
  m.meta().graph.reset();
  m.set_forward_override(nullptr);
}

// The children to trace in turn: those with children of their own (blocks, containers), not
// named in `leaves` by path (below `root`) or type. With `fallback`, a child that cannot be traced
// stays one call in its parent's graph (its forward runs as written), listed in `kept`.
void trace_children(Schedule& sch, const Schedule& root, const std::vector<std::string>& leaves, bool fallback,
                    std::vector<std::shared_ptr<Schedule>>& traced, std::vector<std::string>& kept) {
  for (auto& child : sch.children()) {
    if (child->children().empty()) continue;
    std::string below = child->path().substr(root.path().empty() ? 0 : root.path().size() + 1);
    if (std::find(leaves.begin(), leaves.end(), below) != leaves.end() ||
        std::find(leaves.begin(), leaves.end(), child->mod()->type_name()) != leaves.end())
      continue;
    if (child->mod()->meta().graph) continue;  // traced before, by hand
    try {
      trace_one(*child, {}, {}, false);
    } catch (const std::exception& e) {
      if (fallback) {
        std::string why = e.what();  // its first line: the Lua traceback after it adds nothing here
        fmt::print(stderr, "trace{{recursive = true, fallback = true}} on {}: kept {} ({}) as one call: {}\n",
                   root.where(), child->where(), child->mod()->type_name(), why.substr(0, why.find('\n')));
        kept.push_back(child->path());
        continue;
      }
      throw Error(fmt::format("trace{{recursive = true}} on {}: its child {} ({}) cannot be traced: {}; name it in "
                              "leaves = {{...}} to keep it one call, or pass fallback = true. Nothing was traced",
                              root.where(), child->where(), child->mod()->type_name(), e.what()));
    }
    traced.push_back(child);
    trace_children(*child, root, leaves, fallback, traced, kept);
  }
}

}  // namespace

Values examples_like_last_call(const Module& m, const std::string& where, const char* fn, const char* option) {
  if (m.last_call().empty())
    throw Error(fmt::format("{}: {} has not run yet, so its inputs are unknown; run the model once or pass {}", fn,
                            where, option));
  Values examples;
  bool tail = false;
  for (auto& arg : m.last_call()) {
    if (arg.dtype == at::ScalarType::Undefined) {
      tail = true;
      continue;
    }
    if (tail)
      throw Error(fmt::format("{}: the last call of {} had a non-tensor argument before a tensor; pass {}", fn, where,
                              option));
    auto like = at::TensorOptions().dtype(arg.dtype).device(arg.device);
    examples.push_back(at::isFloatingType(arg.dtype) ? torch::randn(arg.shape, like) : torch::zeros(arg.shape, like));
  }
  if (examples.empty())
    throw Error(fmt::format("{}: the last call of {} had no tensor argument; pass {}", fn, where, option));
  return examples;
}

std::vector<std::string> trace(Schedule& sch, const Values& inputs, const std::vector<std::string>& leaves,
                               bool flatten, const CallSite& site, bool recursive, bool fallback) {
  if (recursive && flatten)
    throw Error(fmt::format("trace: {}: recursive and flatten exclude each other (flatten inlines the children that "
                            "recursive would trace one by one)", sch.where()));
  if (fallback && !recursive)
    throw Error(fmt::format("trace: {}: fallback = true applies to the children a recursive trace visits; pass "
                            "recursive = true with it", sch.where()));
  trace_one(sch, inputs, leaves, flatten);
  std::vector<std::string> kept;
  if (recursive) {
    std::vector<std::shared_ptr<Schedule>> traced;
    try {
      trace_children(sch, sch, leaves, fallback, traced, kept);
    } catch (...) {
      for (auto& t : traced) untrace(*t->mod());
      untrace(*sch.mod());
      throw;
    }
  }
  sch.log().append({"trace", sch.path(), site.lua_args, site.source});
  return kept;
}

std::vector<GraphNode> find_nodes(Schedule& sch, const std::string& pattern) {
  auto& graph = sch.mod()->meta().graph;
  if (!graph)
    throw Error(fmt::format("find: {} is not traced; call trace{{inputs = ...}} on it first", sch.where()));
  std::regex re;
  try {
    re = std::regex(pattern);
  } catch (const std::regex_error& e) {
    throw Error(fmt::format("find: '{}' is not a valid regular expression ({})", pattern, e.what()));
  }
  std::vector<GraphNode> out;
  for (auto& node : graph->nodes())
    if (node.op == "slapo::call_module" && std::regex_search(node.target, re)) out.push_back(node);
  return out;
}

namespace {
std::vector<std::string> shapes_of(const Values& tensors) {
  std::vector<std::string> out;
  for (auto& t : tensors) out.push_back(fmt::format("{}", fmt::join(t.toTensor().sizes(), ", ")));
  return out;
}
}  // namespace

std::vector<std::vector<GraphNode>> find_pattern(Schedule& sch, const std::function<Value(Values)>& fn,
                                                 int n_inputs, const Values& given_examples, bool modules) {
  auto& graph = sch.mod()->meta().graph;
  if (!graph)
    throw Error(fmt::format("find: {} is not traced; call trace{{inputs = ...}} on it first", sch.where()));
  if (n_inputs < 1) throw Error("find: the pattern function must take at least one tensor argument");
  if (!given_examples.empty() && given_examples.size() != static_cast<size_t>(n_inputs))
    throw Error(fmt::format("find: the pattern takes {} arguments but {{inputs = ...}} gives {} example tensors "
                            "(finding in {}); give one per argument",
                            n_inputs, given_examples.size(), sch.where()));
  // Example inputs: the given ones; else the module's own input shapes when the pattern takes as
  // many (so a pattern's view/reshape sizes equal the trace's), else small random ones (ops and
  // wiring are what matter).
  Values examples = given_examples;
  auto& shapes = graph->input_shapes();
  for (int i = 0; examples.size() < static_cast<size_t>(n_inputs); ++i)
    examples.push_back(static_cast<size_t>(n_inputs) == shapes.size() ? torch::randn(shapes[i]) : torch::randn({2, 4}));
  try {
    return graph->match(*trace_pattern(fn, examples), modules);
  } catch (const Error& e) {
    if (!given_examples.empty()) throw;
    throw Error(fmt::format("{} (the pattern ran on example tensors of shapes [{}]; give ones it accepts with "
                            "find(fn, {{inputs = {{...}}}}))",
                            e.what(), fmt::join(shapes_of(examples), "], [")));
  }
}

}  // namespace slapo
