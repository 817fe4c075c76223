// Subgraphs of a traced graph chosen by node names: copied out as graphs of their own, or
// replaced by one call of a new leaf module.
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "graph/traced_graph.h"

namespace slapo {

namespace {

using JNode = torch::jit::Node;
using JValue = torch::jit::Value;

std::string name_of(const JValue* v) { return "%" + v->debugName(); }

// The chosen nodes in graph order, the tensors they read from outside, the values used after them.
struct Selection {
  std::vector<JNode*> nodes;
  std::unordered_set<const JNode*> chosen;
  std::vector<JValue*> inputs, outputs;
};

Selection select(torch::jit::Graph& graph, const std::vector<std::string>& names, const std::string& where,
                 const char* caller) {
  if (names.empty()) throw Error(fmt::format("{}: the subgraph of {} has no nodes", caller, where));
  std::map<std::string, JNode*> by_name;
  for (auto* n : graph.nodes())
    if (!n->outputs().empty()) by_name[name_of(n->outputs()[0])] = n;
  Selection s;
  for (auto& name : names) {
    auto found = by_name.find(name);
    if (found == by_name.end())
      throw Error(fmt::format("{}: no node {} in the graph of {} (sub:graph() lists its nodes; a subgraph found "
                              "before another rewrite may be stale)", caller, name, where));
    s.chosen.insert(found->second);
  }
  // The lists a call node takes are built right before it: they go with it.
  for (auto* n : graph.nodes())
    if (s.chosen.count(n))
      for (auto* in : n->inputs())
        if (in->node()->kind() == c10::prim::ListConstruct && in->uses().size() == 1) s.chosen.insert(in->node());
  for (auto* n : graph.nodes())
    if (s.chosen.count(n)) s.nodes.push_back(n);
  std::unordered_set<const JValue*> seen;
  for (auto* n : s.nodes) {
    for (auto* in : n->inputs()) {
      if (s.chosen.count(in->node()) || in->node()->kind() == c10::prim::Constant || !seen.insert(in).second) continue;
      if (!in->type()->cast<c10::TensorType>())
        throw Error(fmt::format("{}: the subgraph of {} reads {} ({}) from outside, and only tensors can cross its "
                                "border; add the node that computes it to the subgraph", caller, where, name_of(in),
                                in->type()->str()));
      s.inputs.push_back(in);
    }
    for (auto* out : n->outputs()) {
      bool used_outside = false;
      for (auto& use : out->uses()) used_outside |= !s.chosen.count(use.user);
      if (!used_outside) continue;
      if (!out->type()->cast<c10::TensorType>())
        throw Error(fmt::format("{}: {} ({}) of the subgraph of {} is used outside it, and only tensors can cross its "
                                "border; add its users to the subgraph", caller, name_of(out), out->type()->str(), where));
      s.outputs.push_back(out);
    }
  }
  if (s.outputs.empty())
    throw Error(fmt::format("{}: nothing outside the subgraph of {} uses its results", caller, where));
  return s;
}

std::vector<int64_t> shape_of(const JValue* v, const std::string& where, const char* caller) {
  auto type = v->type()->cast<c10::TensorType>();
  auto sizes = type ? type->sizes().concrete_sizes() : c10::nullopt;
  if (!sizes) throw Error(fmt::format("{}: the trace of {} recorded no shape for {}", caller, where, name_of(v)));
  return *sizes;
}

}  // namespace

std::shared_ptr<TracedGraph> TracedGraph::extract(const std::vector<std::string>& names, const std::string& where,
                                                  const char* caller) const {
  auto s = select(*graph_, names, where, caller);
  auto g = std::make_shared<torch::jit::Graph>();
  std::unordered_map<const JValue*, JValue*> env;
  std::vector<std::vector<int64_t>> shapes;
  for (auto* in : s.inputs) {
    auto* v = g->addInput();
    v->setType(in->type());
    env[in] = v;
    shapes.push_back(shape_of(in, where, caller));
  }
  auto get = [&](JValue* v) -> JValue* {
    auto found = env.find(v);
    if (found != env.end()) return found->second;
    // only constants are left: copy them in
    auto* c = g->insertNode(g->createClone(v->node(), [](JValue*) -> JValue* { return nullptr; }));
    return env[v] = c->output();
  };
  for (auto* n : s.nodes) {
    auto* clone = g->insertNode(g->createClone(n, get));
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = clone->outputs()[i];
  }
  if (s.outputs.size() == 1) {
    g->registerOutput(env.at(s.outputs[0]));
  } else {
    std::vector<JValue*> outs;
    for (auto* o : s.outputs) outs.push_back(env.at(o));
    g->registerOutput(g->insertNode(g->createTuple(outs))->output());
  }
  auto out = std::make_shared<TracedGraph>(g, std::vector<at::Tensor>{}, shapes, where);
  for (auto* in : s.inputs) out->input_names_.push_back(name_of(in));  // as the enclosing graph names them
  return out;
}

std::vector<std::string> TracedGraph::input_names() const {
  if (!input_names_.empty()) return input_names_;
  std::vector<std::string> out;
  for (size_t i = 0; i < input_shapes_.size(); ++i) out.push_back(name_of(graph_->inputs()[i]));
  return out;
}

// All or nothing: the rewrite runs in place (nodes it does not touch keep their names, which
// earlier `find` results refer to); if it fails, the module gets back a copy of its graph taken
// before (its unnamed values are numbered anew) and the error says the module is unchanged.
void TracedGraph::replace_with_leaf(const std::vector<std::string>& names, const TraceLeaf& leaf,
                                    const std::string& where) {
  select(*graph_, names, where, "replace");  // the checks that need no rewriting, first
  auto backup = graph_->copy();
  try {
    rewrite_with_leaf(*graph_, names, leaf, where);
    graph_->lint();
    function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
  } catch (const Error&) {  // a refusal of ours: its message says why
    graph_ = backup;
    function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
    throw;
  } catch (const std::exception& e) {
    graph_ = backup;
    function_ = std::make_unique<torch::jit::GraphFunction>("slapo_traced", graph_, nullptr);
    std::string what = e.what();
    throw Error(fmt::format("replace: rewriting the graph of {} failed, and the module is unchanged: {}", where,
                            what.substr(0, what.find('\n'))));
  }
}

void TracedGraph::rewrite_with_leaf(torch::jit::Graph& graph, const std::vector<std::string>& names,
                                    const TraceLeaf& leaf, const std::string& where) {
  auto s = select(graph, names, where, "replace");
  JNode* first = s.nodes.front();
  JNode* last = s.nodes.back();

  // Nodes between the chosen ones that use their results must run after the new call (with one
  // chosen node there are none: the walk would wrap around the graph's node ring).
  std::unordered_set<const JValue*> after;
  for (auto* n : s.nodes)
    for (auto* o : n->outputs()) after.insert(o);
  std::vector<JNode*> to_move;
  for (auto* n = first->next(); first != last && n != last; n = n->next()) {
    bool chosen = s.chosen.count(n) > 0;
    bool depends = false;
    for (auto* in : n->inputs()) depends |= after.count(in) > 0;
    if (chosen || !depends) continue;
    to_move.push_back(n);
    for (auto* o : n->outputs()) after.insert(o);
  }
  for (auto* n : s.nodes)
    for (auto* in : n->inputs())
      for (auto* m : to_move)
        for (auto* o : m->outputs())
          if (in == o)
            throw Error(fmt::format("replace: the subgraph of {} uses {}, which itself uses the subgraph's results; "
                                    "choose nodes that form one step of the computation", where, name_of(o)));

  int64_t id = register_leaf(leaf);
  torch::jit::WithInsertPoint guard(last->next());
  auto& g = graph;
  auto* list = g.insertNode(g.createList(c10::TensorType::get(), s.inputs))->output();
  auto* id_value = g.insertConstant(id);
  std::vector<JValue*> results;
  JNode* tail;
  if (s.outputs.size() == 1) {
    tail = g.insertNode(g.create(c10::Symbol::fromQualString("slapo::call_module"), {id_value, list}, 1));
    tail->output()->setType(c10::TensorType::get());
    results.push_back(tail->output());
  } else {
    auto* call = g.insertNode(g.create(c10::Symbol::fromQualString("slapo::call_module_list"), {id_value, list}, 1));
    call->output()->setType(c10::ListType::ofTensors());
    tail = g.insertNode(g.createListUnpack(call->output(), s.outputs.size()));
    for (auto* o : tail->outputs()) results.push_back(o);
  }
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    results[i]->setType(s.outputs[i]->type());
    s.outputs[i]->replaceAllUsesWith(results[i]);
  }
  for (auto* m : to_move) {
    m->moveAfter(tail);
    tail = m;
  }
  for (auto it = s.nodes.rbegin(); it != s.nodes.rend(); ++it) (*it)->destroy();
  torch::jit::EliminateDeadCode(graph.block());
}

}  // namespace slapo
