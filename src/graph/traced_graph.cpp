// Tracing with LibTorch's tracer, leaf modules as slapo::call_module nodes, graph execution.
#include "graph/traced_graph.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/subgraph_matcher.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <set>
#include <mutex>
#include <regex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/torch_error.h"

namespace slapo {

namespace {

// Leaf modules a graph calls, by id (a graph holds the id as a constant).
struct LeafRegistry {
  std::mutex mutex;
  struct Entry {
    std::weak_ptr<Module> parent;
    std::string slot, path;
    // A call site that also passed non-tensor arguments: each argument in order, a constant or
    // (none) the next tensor input. Empty: the tensor inputs are all the arguments.
    std::vector<c10::optional<Value>> layout;
  };
  std::unordered_map<int64_t, Entry> leaves;
  int64_t next = 1;
};
LeafRegistry& registry() {
  static LeafRegistry r;
  return r;
}

Value call_leaf(int64_t id, at::TensorList inputs, std::string* path_out);

at::Tensor call_module(int64_t id, at::TensorList inputs) {
  std::string path;
  Value out = call_leaf(id, inputs, &path);
  if (!out.isTensor()) throw Error(fmt::format("call_module: leaf '{}' returned a {}, not a tensor", path, out.tagKind()));
  return out.toTensor();
}

// A leaf standing for a subgraph with several outputs returns a tuple of tensors.
std::vector<at::Tensor> call_module_list(int64_t id, at::TensorList inputs) {
  std::string path;
  Value out = call_leaf(id, inputs, &path);
  std::vector<at::Tensor> tensors;
  if (out.isTensor()) return {out.toTensor()};
  if (out.isTuple())
    for (auto& e : out.toTupleRef().elements())
      if (e.isTensor()) tensors.push_back(e.toTensor());
      else throw Error(fmt::format("call_module: leaf '{}' returned a tuple holding a {}", path, e.tagKind()));
  else if (out.isList())
    for (const Value& e : out.toListRef())
      if (e.isTensor()) tensors.push_back(e.toTensor());
      else throw Error(fmt::format("call_module: leaf '{}' returned a list holding a {}", path, e.tagKind()));
  else throw Error(fmt::format("call_module: leaf '{}' returned a {}, not tensors", path, out.tagKind()));
  return tensors;
}

Value call_leaf(int64_t id, at::TensorList inputs, std::string* path_out) {
  // the slot's current module: replace() reaches into traced graphs
  auto m = leaf_module(id, path_out);
  if (!m)
    throw Error(path_out->empty() ? fmt::format("call_module: no leaf module with id {}", id)
                                  : fmt::format("call_module: the module holding leaf '{}' no longer exists", *path_out));
  std::vector<c10::optional<Value>> layout;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    layout = registry().leaves[id].layout;
  }
  if (layout.empty()) return (*m)(Values(inputs.begin(), inputs.end()));
  Values args;
  size_t next = 0;
  for (auto& slot : layout) {
    if (slot) args.push_back(*slot);
    else if (next < inputs.size()) args.emplace_back(inputs[next++]);
    else throw Error(fmt::format("call_module: leaf '{}' got {} tensors, its call site passed more", *path_out, inputs.size()));
  }
  return (*m)(std::move(args));
}

// True when `v` is or holds a tensor (a table of tensors, a tuple of them): such an argument
// cannot be a constant of the graph.
bool holds_tensor(const Value& v) {
  if (v.isTensor()) return true;
  if (v.isTuple())
    for (auto& e : v.toTupleRef().elements())
      if (holds_tensor(e)) return true;
  if (v.isList())
    for (const Value& e : v.toListRef())
      if (holds_tensor(e)) return true;
  if (v.isGenericDict())
    for (auto& item : v.toGenericDict())
      if (holds_tensor(item.value())) return true;
  return false;
}

// A tuple whose every element is a tensor.
bool is_tensor_tuple(const Value& v) {
  const auto& elements = v.toTupleRef().elements();
  return !elements.empty() &&
         std::all_of(elements.begin(), elements.end(), [](const Value& e) { return e.isTensor(); });
}

// A leaf call with non-tensor arguments (numbers, strings, flags, nil): a call site of its own
// that replays them as constants around the traced tensor inputs.
int64_t register_call_site(int64_t leaf_id, const Values& args) {
  std::vector<c10::optional<Value>> layout;
  bool constants = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isTensor()) {
      layout.emplace_back(c10::nullopt);
      continue;
    }
    if (holds_tensor(args[i]))
      throw Error(fmt::format("trace: leaf '{}' is called with a {} holding tensors as argument {}; a traced call "
                              "passes tensors and constants, so make its caller a leaf too",
                              leaf_path(leaf_id), args[i].tagKind(), i + 1));
    layout.emplace_back(args[i]);
    constants = constants || !args[i].isNone();
  }
  if (!constants) return leaf_id;  // tensors (and nils) only: the plain call replays it
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto entry = registry().leaves[leaf_id];
  entry.layout = std::move(layout);
  int64_t site = registry().next++;
  registry().leaves[site] = std::move(entry);
  return site;
}

// Ops by which a forward reads a tensor's value into the host: a trace would freeze that value.
const std::unordered_set<std::string> kDataDependent = {"aten::item", "aten::_local_scalar_dense", "aten::Int",
                                                        "aten::Float", "aten::Bool", "aten::ScalarImplicit",
                                                        "aten::is_nonzero"};

// The leaf id a slapo::call_module(_list) node calls; none for any other node.
c10::optional<int64_t> leaf_call_id(const torch::jit::Node* node) {
  std::string kind = node->kind().toQualString();
  if (kind != "slapo::call_module" && kind != "slapo::call_module_list") return c10::nullopt;
  auto id = torch::jit::toIValue(node->input(0));
  return id && id->isInt() ? c10::make_optional(id->toInt()) : c10::nullopt;
}

}  // namespace

std::vector<std::shared_ptr<Module>> TracedGraph::called_leaves() const {
  std::vector<std::shared_ptr<Module>> out;
  for (int64_t id : leaf_call_ids()) {
    auto m = leaf_module(id);
    if (m && std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  }
  return out;
}

std::vector<int64_t> TracedGraph::leaf_call_ids() const {
  std::vector<int64_t> out;
  for (auto* node : graph_->nodes())
    if (auto id = leaf_call_id(node)) out.push_back(*id);
  return out;
}

void TracedGraph::renumber_leaf_calls(const std::unordered_map<int64_t, int64_t>& ids) {
  for (auto* node : graph_->nodes()) {
    auto id = leaf_call_id(node);
    auto found = id ? ids.find(*id) : ids.end();
    if (found == ids.end()) continue;
    torch::jit::WithInsertPoint guard(node);
    node->replaceInput(0, graph_->insertConstant(found->second));
  }
  torch::jit::EliminateDeadCode(graph_->block());  // the old id constants
  function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
}

TraceLeaf leaf_place(int64_t id) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto found = registry().leaves.find(id);
  if (found == registry().leaves.end()) return {};
  return {found->second.parent.lock(), found->second.slot, found->second.path};
}

int64_t relocate_leaf(int64_t id, const TraceLeaf& place) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto entry = registry().leaves.at(id);
  entry.parent = place.parent;
  entry.slot = place.slot;
  entry.path = place.path;
  int64_t fresh = registry().next++;
  registry().leaves[fresh] = std::move(entry);
  return fresh;
}

int64_t register_leaf(const TraceLeaf& leaf) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  int64_t id = registry().next++;
  registry().leaves[id] = {leaf.parent, leaf.slot, leaf.path, {}};
  return id;
}

std::shared_ptr<Module> leaf_module(int64_t id, std::string* path_out) {
  std::shared_ptr<Module> parent;
  std::string slot;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto found = registry().leaves.find(id);
    if (found == registry().leaves.end()) return nullptr;
    parent = found->second.parent.lock();
    slot = found->second.slot;
    if (path_out) *path_out = found->second.path;
  }
  return parent ? parent->child(slot) : nullptr;
}

std::string leaf_path(int64_t id) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto found = registry().leaves.find(id);
  return found == registry().leaves.end() ? std::string() : found->second.path;
}

void refuse_value_read_while_tracing(const char* what) {
  if (torch::jit::tracer::isTracing())
    throw Error(fmt::format("{} reads a tensor's value while tracing, so the trace would bake in this input's "
                            "value (a data-dependent branch); make the module that does it a leaf", what));
}

namespace {

// One spelling for one computation, in models and patterns alike: a permute that swaps two
// axes is a transpose (HF's BERT permutes q/k/v by (0, 2, 1, 3); the zoo transposes (1, 2)).
void canonicalize(torch::jit::Graph& graph) {
  std::vector<torch::jit::Node*> permutes;
  for (auto* node : graph.nodes())
    if (node->kind() == c10::aten::permute && node->inputs().size() == 2) permutes.push_back(node);
  for (auto* node : permutes) {
    std::vector<int64_t> dims;
    auto* list = node->input(1)->node();
    if (list->kind() == c10::prim::ListConstruct) {
      for (auto* item : list->inputs()) {
        auto d = torch::jit::constant_as<int64_t>(item);
        if (!d) break;
        dims.push_back(*d);
      }
      if (dims.size() != list->inputs().size()) continue;
    } else if (auto constant = torch::jit::constant_as<std::vector<int64_t>>(node->input(1))) {
      dims = *constant;
    } else {
      continue;
    }
    std::vector<int64_t> moved;
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] != static_cast<int64_t>(i)) moved.push_back(static_cast<int64_t>(i));
    if (moved.size() != 2 || dims[moved[0]] != moved[1]) continue;
    torch::jit::WithInsertPoint guard(node);
    auto* t = graph.insert(c10::aten::transpose, {node->input(0), moved[0], moved[1]});
    t->setType(node->output()->type());
    node->output()->replaceAllUsesWith(t);
    node->destroy();
  }
  if (!permutes.empty()) torch::jit::EliminateDeadCode(graph.block());
}

}  // namespace

std::shared_ptr<TracedGraph> trace_pattern(const std::function<Value(Values)>& fn, const Values& example_inputs) {
  torch::jit::Stack inputs(example_inputs.begin(), example_inputs.end());
  std::shared_ptr<torch::jit::Graph> graph;
  try {
    auto traced = torch::jit::tracer::trace(
        inputs,
        [&](torch::jit::Stack in) -> torch::jit::Stack {
          Value out = fn(Values(in.begin(), in.end()));
          if (!out.isTensor()) throw Error(fmt::format("find: the pattern returned a {}, not a tensor", out.tagKind()));
          return {out};
        },
        [](const at::Tensor&) { return std::string(); }, /*strict=*/false);
    graph = traced.first->graph;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("find: tracing the pattern failed: {}", message_without_backtrace(e)));
  }
  canonicalize(*graph);
  std::vector<std::vector<int64_t>> shapes;
  for (auto& v : example_inputs) shapes.push_back(v.toTensor().sizes().vec());
  return std::make_shared<TracedGraph>(graph, std::vector<at::Tensor>{}, shapes, "pattern");
}

// In a pattern function: stands for a call of any leaf whose path matches `regex`. Traced, it
// records a node that match() turns into a call_module with any id; run, it passes its first
// input on (the pattern only needs shapes that let the following ops run).
at::Tensor pattern_call_module(c10::string_view, at::TensorList inputs) {
  if (inputs.empty()) throw Error("pattern.call_module: give the module's tensor inputs");
  return inputs[0].clone();
}

TORCH_LIBRARY_FRAGMENT(slapo, m) {
  m.def("call_module(int id, Tensor[] inputs) -> Tensor");
  m.def("call_module_list(int id, Tensor[] inputs) -> Tensor[]");
  m.def("pattern_call_module(str regex, Tensor[] inputs) -> Tensor");
}
// The leaf's own forward records autograd; the ops need no backward of their own.
TORCH_LIBRARY_IMPL(slapo, CompositeImplicitAutograd, m) {
  m.impl("call_module", call_module);
  m.impl("call_module_list", call_module_list);
  m.impl("pattern_call_module", pattern_call_module);
}

at::Tensor call_module_pattern(const std::string& regex, const std::vector<at::Tensor>& inputs) {
  try {
    std::regex check(regex.rfind("type:", 0) == 0 ? regex.substr(5) : regex);
  } catch (const std::regex_error& e) {
    bool by_type = regex.rfind("type:", 0) == 0;
    throw Error(fmt::format("pattern.{}: '{}' is not a valid regular expression ({})", by_type ? "module" : "call_module",
                            by_type ? regex.substr(5) : regex, e.what()));
  }
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("slapo::pattern_call_module", "")
                       .typed<at::Tensor(c10::string_view, at::TensorList)>();
  return op.call(regex, inputs);
}

TracedGraph::TracedGraph(std::shared_ptr<torch::jit::Graph> graph, std::vector<at::Tensor> params,
                         std::vector<std::vector<int64_t>> input_shapes, std::string where)
    : graph_(std::move(graph)), params_(std::move(params)), input_shapes_(std::move(input_shapes)), where_(std::move(where)) {
  function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
}

TracedGraph::~TracedGraph() = default;

std::shared_ptr<TracedGraph> TracedGraph::copy() const {
  auto copied = std::make_shared<TracedGraph>(graph_->copy(), params_, input_shapes_, where_);
  copied->input_names_ = input_names_;
  return copied;
}

void TracedGraph::assign(const TracedGraph& other) {
  graph_ = other.graph_->copy();  // `other` stays as it is, to be assigned again
  params_ = other.params_;
  input_shapes_ = other.input_shapes_;
  where_ = other.where_;
  input_names_ = other.input_names_;
  function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
}

Value TracedGraph::run(const Values& given) {
  Values args = given;  // a parent may pass optional arguments as None (BERT's absent mask)
  while (args.size() > input_shapes_.size() && args.back().isNone()) args.pop_back();
  if (args.size() != input_shapes_.size())
    throw Error(fmt::format("traced {}: called with {} inputs, traced with {}", where_, args.size(), input_shapes_.size()));
  for (size_t i = 0; i < args.size(); ++i)
    if (!args[i].isTensor() || args[i].toTensor().sizes().vec() != input_shapes_[i])
      throw Error(fmt::format("traced {}: input {} has shape [{}] but the trace was taken with [{}]; the trace holds "
                              "the example's sizes, so trace it again with inputs of this shape",
                              where_, i + 1, args[i].isTensor() ? fmt::format("{}", fmt::join(args[i].toTensor().sizes(), ", ")) : args[i].tagKind(),
                              fmt::join(input_shapes_[i], ", ")));
  torch::jit::Stack stack(args.begin(), args.end());
  for (auto& p : params_) stack.emplace_back(p);
  return (*function_)(std::move(stack));
}

int TracedGraph::optimize_torchscript() {
  auto count = [this] {
    int n = 0;
    for (auto* node : graph_->nodes()) n += node->kind() != c10::prim::Constant;
    return n;
  };
  int before = count();
  torch::jit::ConstantPropagation(graph_);
  torch::jit::EliminateCommonSubexpression(graph_);
  torch::jit::PeepholeOptimize(graph_);
  torch::jit::EliminateDeadCode(graph_);
  function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
  return before - count();
}

void TracedGraph::swap_params(const std::unordered_map<const c10::TensorImpl*, at::Tensor>& replaced) {
  for (auto& p : params_) {
    auto found = replaced.find(p.unsafeGetTensorImpl());
    if (found != replaced.end()) p = found->second;
  }
}

std::string TracedGraph::str() const {
  std::ostringstream out;
  out << *graph_;
  return out.str();
}

namespace {

// Functional activations (and dropout) a pattern may also match as module calls
// (find{modules = true}); the module's own settings stand for the function's other arguments.
const std::map<std::string, std::string> kFunctionalModules = {{"aten::relu", "ReLU"},       {"aten::silu", "SiLU"},
                                                               {"aten::tanh", "Tanh"},       {"aten::sigmoid", "Sigmoid"},
                                                               {"aten::dropout", "Dropout"}};

// The pattern with the activations picked by `mask` (bits over `candidates`) turned into calls of
// a leaf of the matching module type.
std::shared_ptr<torch::jit::Graph> with_module_calls(torch::jit::Graph& pattern,
                                                     const std::vector<size_t>& candidates, unsigned mask) {
  auto g = pattern.copy();
  std::vector<torch::jit::Node*> nodes(g->nodes().begin(), g->nodes().end());
  for (size_t bit = 0; bit < candidates.size(); ++bit) {
    if (!(mask & (1u << bit))) continue;
    auto* node = nodes[candidates[bit]];
    torch::jit::WithInsertPoint guard(node);
    auto* regex = g->insertConstant(std::string("type:^") + kFunctionalModules.at(node->kind().toQualString()) + "$");
    auto* list = g->insertNode(g->createList(c10::TensorType::get(), {node->input(0)}))->output();
    auto* call = g->insertNode(g->create(c10::Symbol::fromQualString("slapo::pattern_call_module"), {regex, list}, 1));
    call->output()->setType(node->output()->type());
    node->output()->replaceAllUsesWith(call->output());
    node->destroy();
  }
  return g;
}

}  // namespace

std::vector<std::vector<GraphNode>> TracedGraph::match(const TracedGraph& pattern_in, bool modules) const {
  // find{modules = true}: each functional activation of the pattern may also be a module call;
  // every combination is a pattern of its own (at most 2^4, the first four such activations).
  std::vector<size_t> candidates;
  if (modules) {
    size_t i = 0;
    for (auto* node : pattern_in.graph_->nodes()) {
      if (kFunctionalModules.count(node->kind().toQualString()) && candidates.size() < 4) candidates.push_back(i);
      ++i;
    }
  }
  std::vector<std::pair<size_t, std::vector<size_t>>> ordered;
  std::set<std::vector<size_t>> seen;
  for (unsigned mask = 0; mask < (1u << candidates.size()); ++mask)
    for (auto& found : match_variant(*with_module_calls(*pattern_in.graph_, candidates, mask)))
      if (seen.insert(found).second) ordered.emplace_back(found.front(), found);
  // in graph order of each match's first node
  std::stable_sort(ordered.begin(), ordered.end(), [](auto& a, auto& b) { return a.first < b.first; });
  auto described = nodes();
  std::vector<std::vector<GraphNode>> out;
  for (auto& [first, picked] : ordered) {
    out.emplace_back();
    for (auto i : picked) out.back().push_back(described[i]);
  }
  return out;
}

std::vector<std::vector<size_t>> TracedGraph::match_variant(torch::jit::Graph& pattern) const {
  // A pattern's call_module placeholders become call nodes whose id is a pattern input (any
  // leaf); a match counts when each matched leaf's path (or, for "type:" ones, its module type)
  // fits the placeholder's regex.
  auto pattern_graph = pattern.copy();
  struct Placeholder {
    torch::jit::Node* call;
    std::regex regex;
    bool by_type;
  };
  std::vector<Placeholder> calls;
  for (auto it = pattern_graph->nodes().begin(); it != pattern_graph->nodes().end();) {
    auto* node = *it++;
    if (node->kind().toQualString() != std::string("slapo::pattern_call_module")) continue;
    auto regex = torch::jit::constant_as<std::string>(node->inputs()[0]);
    if (!regex) throw Error("find: pattern.call_module needs a constant regular expression");
    bool by_type = regex->rfind("type:", 0) == 0;
    auto* any_id = pattern_graph->addInput();
    any_id->setType(c10::IntType::get());
    torch::jit::WithInsertPoint guard(node);
    auto* call = pattern_graph->insertNode(
        pattern_graph->create(c10::Symbol::fromQualString("slapo::call_module"), {any_id, node->inputs()[1]}, 1));
    call->output()->setType(c10::TensorType::get());
    node->output()->replaceAllUsesWith(call->output());
    node->destroy();
    calls.push_back({call, std::regex(by_type ? regex->substr(5) : *regex), by_type});
  }
  // softmax(x, dim) in a pattern (dtype None) also matches softmax(x, dim, dtype) where dtype is
  // x's own (the zoo asks for float32 on float32 scores): the pattern's dtype becomes a free
  // input, and a match keeps only None or the input's dtype.
  std::vector<torch::jit::Node*> free_dtype;
  for (auto* node : pattern_graph->nodes()) {
    std::string kind = node->kind().toQualString();
    if ((kind != "aten::softmax" && kind != "aten::log_softmax") || node->inputs().size() != 3) continue;
    auto dtype = torch::jit::toIValue(node->input(2));
    if (!dtype || !dtype->isNone()) continue;
    auto* any_dtype = pattern_graph->addInput();
    any_dtype->setType(c10::OptionalType::create(c10::IntType::get()));
    node->replaceInput(2, any_dtype);
    free_dtype.push_back(node);
  }
  torch::jit::EliminateDeadCode(pattern_graph);
  // LibTorch's matcher refuses a match whose inner values have users outside it, except for the
  // pattern's outputs. Making every inner value an extra output lets such a value escape: the
  // subgraph then returns it too (Slapo's diamond case). The first output stays the anchor.
  {
    std::unordered_set<const torch::jit::Value*> outputs(pattern_graph->outputs().begin(),
                                                         pattern_graph->outputs().end());
    std::vector<torch::jit::Value*> inner;
    for (auto* node : pattern_graph->nodes()) {
      auto kind = node->kind();
      if (kind == c10::prim::Constant || kind == c10::prim::ListConstruct) continue;
      for (auto* v : node->outputs())
        if (!outputs.count(v) && !v->uses().empty()) inner.push_back(v);
    }
    for (auto* v : inner) pattern_graph->registerOutput(v);
  }
  auto own_dtype = [](const torch::jit::Node* softmax) {
    auto dtype = torch::jit::toIValue(softmax->input(2));
    if (!dtype) return false;
    if (dtype->isNone()) return true;
    auto type = softmax->input(0)->type()->cast<c10::TensorType>();
    return dtype->isInt() && type && type->scalarType() && static_cast<int64_t>(*type->scalarType()) == dtype->toInt();
  };
  auto fits_placeholder = [](const Placeholder& p, int64_t id) {
    if (!p.by_type) return std::regex_search(leaf_path(id), p.regex);
    auto leaf = leaf_module(id);
    return leaf && std::regex_search(leaf->type_name(), p.regex);
  };

  // Each match's nodes as indices into nodes(), in graph order.
  std::unordered_map<const torch::jit::Node*, size_t> index;
  size_t k = 0;
  for (auto* node : graph_->nodes()) {
    if (node->kind() == c10::prim::Constant || node->kind() == c10::prim::ListConstruct) continue;
    index[node] = k++;
  }
  std::vector<std::vector<size_t>> out;
  for (auto& m : torch::jit::findPatternMatches(*pattern_graph, *graph_)) {
    bool fits = true;
    for (auto& p : calls) {
      auto id = torch::jit::constant_as<int64_t>(m.nodes_map.at(p.call)->inputs()[0]);
      fits = fits && id && fits_placeholder(p, *id);
    }
    for (auto* pattern_softmax : free_dtype) fits = fits && own_dtype(m.nodes_map.at(pattern_softmax));
    if (!fits) continue;
    std::vector<size_t> picked;
    for (auto& [pattern_node, graph_node] : m.nodes_map) {
      auto kind = pattern_node->kind();
      if (kind == c10::prim::Constant || kind == c10::prim::ListConstruct || kind == c10::prim::Param ||
          kind == c10::prim::Return)
        continue;
      auto found = index.find(graph_node);
      if (found != index.end()) picked.push_back(found->second);
    }
    if (picked.empty()) continue;
    std::sort(picked.begin(), picked.end());
    out.push_back(std::move(picked));
  }
  return out;
}

std::vector<GraphNode> TracedGraph::nodes() const {
  std::unordered_map<int64_t, std::string> paths;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (auto& [id, leaf] : registry().leaves) paths[id] = leaf.path;
  }
  std::vector<GraphNode> out;
  for (auto* node : graph_->nodes()) {
    if (node->kind() == c10::prim::Constant || node->kind() == c10::prim::ListConstruct) continue;
    GraphNode n;
    n.op = node->kind().toQualString();
    n.name = node->outputs().empty() ? "" : "%" + node->outputs()[0]->debugName();
    for (auto* in : node->inputs()) {
      if (in->node()->kind() == c10::prim::ListConstruct)
        for (auto* item : in->node()->inputs()) n.inputs.push_back("%" + item->debugName());
      else if (in->node()->kind() != c10::prim::Constant)
        n.inputs.push_back("%" + in->debugName());
    }
    for (auto* o : node->outputs())
      for (auto& use : o->uses()) n.users.push_back(use.user->outputs().empty() ? "return" : "%" + use.user->outputs()[0]->debugName());
    if (n.op == "slapo::call_module" || n.op == "slapo::call_module_list") {
      auto id = torch::jit::constant_as<int64_t>(node->inputs()[0]);
      if (id && paths.count(*id)) n.target = paths[*id];
    }
    out.push_back(std::move(n));
  }
  return out;
}

Values with_keywords(const Values& values, const std::vector<std::string>& keyword_names,
                     const c10::optional<c10::impl::GenericDict>& constant) {
  const size_t positional = values.size() - keyword_names.size();
  Values args(values.begin(), values.begin() + static_cast<int64_t>(positional));
  if (keyword_names.empty() && !constant) return args;
  c10::impl::GenericDict named =
      constant ? constant->copy() : c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
  for (size_t k = 0; k < keyword_names.size(); ++k) named.insert_or_assign(keyword_names[k], values[positional + k]);
  args.emplace_back(named);
  return args;
}

std::shared_ptr<TracedGraph> trace_module(Module& module, const std::string& where, const Values& example_inputs,
                                          const std::vector<TraceLeaf>& leaves,
                                          const c10::optional<c10::impl::GenericDict>& keywords,
                                          const std::vector<std::string>& keyword_inputs) {
  if (keyword_inputs.size() > example_inputs.size())
    throw Error(fmt::format("trace: {} keyword inputs named for {} inputs of {}", keyword_inputs.size(),
                            example_inputs.size(), where));
  for (size_t i = 0; i < example_inputs.size(); ++i)
    if (!example_inputs[i].isTensor())
      throw Error(fmt::format("trace: input {} of {} is a {}; trace takes tensor inputs", i + 1, where,
                              example_inputs[i].tagKind()));
  // Parameters go in as extra inputs: the tracer maps tensors by identity, so the module's own
  // parameters become graph inputs instead of constants.
  std::vector<at::Tensor> params;
  for (auto& p : unique_named_parameters(module)) params.push_back(p.second);

  // Leaves: paused tracing around their call, one call_module node in its place.
  std::vector<Module::CallWrapper> previous;
  for (auto& leaf_info : leaves) {
    int64_t id = register_leaf(leaf_info);
    auto leaf = leaf_info.parent->child(leaf_info.slot);
    previous.push_back(leaf->call_wrapper());
    leaf->set_call_wrapper([id](Module&, Values args, const std::function<Value(Values)>& run) {
      auto state = torch::jit::tracer::getTracingState();
      if (!state) return run(std::move(args));
      torch::jit::tracer::setTracingState(nullptr);
      Value out;
      try {
        out = run(args);
      } catch (...) {
        torch::jit::tracer::setTracingState(state);
        throw;
      }
      torch::jit::tracer::setTracingState(state);
      int64_t site = register_call_site(id, args);
      auto& graph = *state->graph;
      std::vector<torch::jit::Value*> tensor_inputs;
      for (auto& a : args)
        if (a.isTensor()) tensor_inputs.push_back(torch::jit::tracer::getValueTrace(a));
      auto* list = graph.insertNode(graph.createList(c10::TensorType::get(), tensor_inputs))->output();
      auto* id_value = graph.insertConstant(site);
      // a leaf returning a tuple of tensors (a mixture of experts' layer: its states and router
      // logits) is one call_module_list node, its elements unpacked
      if (out.isTuple() && is_tensor_tuple(out)) {
        auto& elements = out.toTupleRef().elements();
        auto* node = graph.insertNode(graph.create(c10::Symbol::fromQualString("slapo::call_module_list"),
                                                   {id_value, list}, 1));
        node->output()->setType(c10::ListType::ofTensors());
        auto* unpack = graph.insertNode(graph.createListUnpack(node->output(), elements.size()));
        for (size_t i = 0; i < elements.size(); ++i) {
          unpack->outputs()[i]->inferTypeFrom(elements[i].toTensor());
          torch::jit::tracer::setValueTrace(elements[i], unpack->outputs()[i]);
        }
        return out;
      }
      auto* node = graph.insertNode(graph.create(c10::Symbol::fromQualString("slapo::call_module"), {id_value, list}, 1));
      node->output()->setType(c10::TensorType::get());
      if (out.isTensor()) {
        // the leaf's output shape, as the tracer records every op's: subgraphs that read it need it
        node->output()->inferTypeFrom(out.toTensor());
        torch::jit::tracer::setValueTrace(out, node->output());
      }
      return out;
    });
  }
  auto clear_wrappers = [&] {  // give each leaf back the wrapper it had (checkpoint's, say)
    for (size_t i = 0; i < leaves.size(); ++i) leaves[i].parent->child(leaves[i].slot)->set_call_wrapper(previous[i]);
  };

  torch::jit::Stack inputs(example_inputs.begin(), example_inputs.end());
  for (auto& p : params) inputs.emplace_back(p);
  std::shared_ptr<torch::jit::Graph> graph;
  try {
    auto traced = torch::jit::tracer::trace(
        inputs,
        [&](torch::jit::Stack in) -> torch::jit::Stack {
          Values args = with_keywords(Values(in.begin(), in.begin() + static_cast<int64_t>(example_inputs.size())),
                                      keyword_inputs, keywords);
          Value out = module.forward_only(std::move(args));
          if (keywords && out.isTuple() && is_tensor_tuple(out)) {
            auto& elements = out.toTupleRef().elements();
            return torch::jit::Stack(elements.begin(), elements.end());
          }
          if (!out.isTensor())
            throw Error(fmt::format("trace: {} returned a {}; trace supports modules that return one tensor", where,
                                    out.tagKind()));
          return {out};
        },
        [](const at::Tensor&) { return std::string(); }, /*strict=*/false);
    graph = traced.first->graph;
  } catch (const ModuleCallError& e) {  // a module below failed on these inputs: say both
    clear_wrappers();
    throw Error(fmt::format("trace: tracing {} failed: {}", where, e.what()));
  } catch (const Error&) {
    clear_wrappers();
    throw;
  } catch (const std::exception& e) {
    clear_wrappers();
    std::string msg = message_without_backtrace(e);
    if (msg.size() > 400) msg = msg.substr(0, 400) + " ...";  // the tracer dumps whole tensors
    throw Error(fmt::format("trace: tracing {} failed: {}", where, msg));
  }
  clear_wrappers();
  for (auto* node : graph->nodes()) {
    std::string kind = node->kind().toQualString();
    if (kDataDependent.count(kind))
      throw Error(fmt::format("trace: {} reads a tensor's value into a number ({}), so a trace would bake in this "
                              "input's value; make the module that does it a leaf (trace{{leaves = {{...}}}})",
                              where, kind));
  }
  canonicalize(*graph);
  std::vector<std::vector<int64_t>> shapes;
  for (auto& v : example_inputs) shapes.push_back(v.toTensor().sizes().vec());
  return std::make_shared<TracedGraph>(graph, params, shapes, where);
}

}  // namespace slapo
