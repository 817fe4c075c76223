// Tracing the module the intra-op pass plans for, once (intra_op_analysis.h).
#include "plan/intra_op_analysis.h"

#include <torch/csrc/jit/ir/ir.h>

#include "core/error.h"
#include "plan/intra_op.h"
#include "plan/saved_tensors.h"

namespace slapo::plan {

namespace {

// Every Linear / Conv1D below `m` is a projection; they and the dropouts stay calls in the trace.
// `uses` counts each parameter's modules: a weight tied to another module's (GPT-2's LM head and
// embedding) is not sharded.
void collect_leaves(const std::shared_ptr<Module>& m, const std::string& path,
                    const std::unordered_map<c10::TensorImpl*, int>& uses, std::vector<TraceLeaf>& leaves,
                    std::map<std::string, Projection>& projections, std::set<std::string>& dropouts) {
  for (auto& [name, child] : m->children_in_order()) {
    std::string p = path.empty() ? name : path + "." + name;
    const std::string& type = child->type_name();
    if (type == "Linear" || type == "Conv1D" || type == "Dropout") {
      leaves.push_back({m, name, p});
      if (type == "Dropout") dropouts.insert(p);
      if (type != "Dropout") {
        auto w = child->param("weight");
        // Linear's weight is [out, in]; GPT-2's Conv1D stores [in, out]
        auto found = uses.find(w.unsafeGetTensorImpl());
        projections[p] = {p, type, type == "Linear" ? w.size(1) : w.size(0), type == "Linear" ? w.size(0) : w.size(1),
                          child->has_param("bias"), found != uses.end() && found->second > 1};
      }
      continue;
    }
    collect_leaves(child, p, uses, leaves, projections, dropouts);
  }
}



std::string parent_of(const std::string& path) {
  auto dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

// For each input read by two projections or more: their nearest common module, traced on its own
// (inputs shaped like its call in the main trace, zeros on its device), must take that input first and use it
// only in those projections (and for its shape).
void find_shared_inputs(IntraOpAnalysis& a, const std::shared_ptr<Module>& root, const std::vector<TraceLeaf>& leaves) {
  std::vector<const torch::jit::Value*> seen;
  for (size_t i = 0; i < a.projections.size(); ++i) {
    const auto* x = a.inputs[i];
    if (!x || std::find(seen.begin(), seen.end(), x) != seen.end()) continue;
    seen.push_back(x);
    SharedInput group;
    for (size_t j = i; j < a.projections.size(); ++j)
      if (a.inputs[j] == x) group.readers.push_back(j);
    if (group.readers.size() < 2) continue;
    group.parent = parent_of(a.projections[group.readers[0]].path);
    for (size_t r : group.readers) {
      const std::string& path = a.projections[r].path;
      while (!group.parent.empty() && path.compare(0, group.parent.size() + 1, group.parent + ".") != 0)
        group.parent = parent_of(group.parent);
    }
    if (group.parent.empty()) continue;  // the traced module itself: its callers own its input
    auto parent = module_at(root, group.parent);
    if (!parent || parent->last_call().empty()) continue;
    Values examples;
    for (auto& arg : parent->last_call()) {
      if (arg.dtype == at::ScalarType::Undefined) break;
      examples.push_back(at::zeros(arg.shape, at::TensorOptions().dtype(arg.dtype).device(arg.device)));
    }
    std::vector<TraceLeaf> inner;
    const std::string prefix = group.parent + ".";
    for (auto& leaf : leaves)
      if (leaf.path.compare(0, prefix.size(), prefix) == 0) inner.push_back({leaf.parent, leaf.slot, leaf.path.substr(prefix.size())});
    std::shared_ptr<TracedGraph> traced;
    try {
      torch::NoGradGuard no_grad;
      traced = trace_module(*parent, group.parent, examples, inner);
    } catch (const std::exception&) {
      continue;  // a module that does not trace alone keeps a sync on each projection
    }
    std::set<std::string> wanted;
    for (size_t r : group.readers) wanted.insert(a.projections[r].path.substr(prefix.size()));
    std::set<std::string> found;
    bool alone = true;
    const auto* input = traced->graph()->inputs()[0];
    for (const auto& use : input->uses()) {
      std::string kind = use.user->kind().toQualString();
      if (kShapeOnly.count(kind)) continue;
      bool projection_call = false;
      if (use.user->kind() == c10::prim::ListConstruct && use.user->inputs().size() == 1)
        for (const auto& call : use.user->output()->uses()) {
          if (std::string(call.user->kind().toQualString()) != "slapo::call_module") continue;
          auto id = torch::jit::constant_as<int64_t>(call.user->input(0));
          std::string path = id ? leaf_path(*id) : "";
          if (wanted.count(path)) projection_call = true, found.insert(path);
        }
      alone = alone && projection_call;
    }
    if (alone && found == wanted) a.shared.push_back(group);
  }
}

}  // namespace

std::shared_ptr<Module> module_at(const std::shared_ptr<Module>& root, const std::string& path) {
  std::shared_ptr<Module> m = root;
  size_t start = 0;
  while (m && start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string name = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    m = m->child(name);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return m;
}

std::unique_ptr<IntraOpAnalysis> analyse_module(const std::shared_ptr<Module>& copy, const std::string& where,
                                                const Values& example_inputs) {
  std::vector<TraceLeaf> leaves;
  std::unordered_map<c10::TensorImpl*, int> uses;
  for (auto& item : copy->named_parameters(true)) ++uses[item.value().unsafeGetTensorImpl()];
  auto analysis = std::make_unique<IntraOpAnalysis>();
  IntraOpAnalysis& a = *analysis;
  a.module = copy;
  auto& by_path = a.by_path;
  collect_leaves(copy, "", uses, leaves, by_path, a.dropouts);
  if (by_path.empty())
    throw Error(fmt::format("autoshard: {} ({}) has no Linear or Conv1D to shard", where, copy->type_name()));
  try {
    torch::NoGradGuard no_grad;
    a.graph = trace_module(*copy, where, example_inputs, leaves);
  } catch (const Error& e) {
    throw Error(fmt::format("autoshard: {} (inputs: the module's own last inputs, or {{inputs = {{x, ...}}}})", e.what()));
  }
  // the projections in the order the trace calls them
  for (auto* node : a.graph->graph()->nodes()) {
    if (std::string(node->kind().toQualString()) != "slapo::call_module") continue;
    auto id = torch::jit::constant_as<int64_t>(node->input(0));
    auto found = id ? by_path.find(leaf_path(*id)) : by_path.end();
    if (found == by_path.end()) continue;
    a.projections.push_back(found->second);
    auto* list = node->input(1)->node();
    a.inputs.push_back(list->inputs().empty() ? nullptr : list->inputs()[0]);
    a.outputs.push_back(node->output());
  }
  find_shared_inputs(a, copy, leaves);
  a.saved = saved_for_backward(*a.graph->graph(), [&](const torch::jit::Node* call) {
    auto id = torch::jit::constant_as<int64_t>(call->input(0));
    return id && a.dropouts.count(leaf_path(*id)) > 0;
  });
  // the example's tokens: every dimension of token ids, the leading ones of hidden states
  {
    const at::Tensor& x = example_inputs.front().toTensor();
    a.example_tokens = 1;
    int64_t dims = at::isFloatingType(x.scalar_type()) ? x.dim() - 1 : x.dim();
    for (int64_t i = 0; i < dims; ++i) a.example_tokens *= double(x.size(i));
    a.example_seq = dims > 0 ? x.size(dims - 1) : 0;
    // hidden states [.., sequence, hidden] split along the sequence
    if (at::isFloatingType(x.scalar_type()) && dims > 0 && a.example_seq > 1) a.token_axis = dims - 1;
    if (a.token_axis >= 0) a.token_axes = trace_token_axes(*a.graph->graph(), a.token_axis);
  }
  // the parameters the graph reads, by owning module
  {
    std::unordered_map<const c10::TensorImpl*, std::pair<std::string, double>> owner;
    for (auto& item : copy->named_parameters(true))
      owner.emplace(item.value().unsafeGetTensorImpl(),
                    std::make_pair(item.key(), double(item.value().numel())));
    auto inputs = a.graph->graph()->inputs();
    size_t first_param = a.graph->input_shapes().size();
    for (size_t i = first_param; i < inputs.size() && i - first_param < a.graph->params().size(); ++i) {
      auto found = owner.find(a.graph->params()[i - first_param].unsafeGetTensorImpl());
      if (found != owner.end()) a.params_of[inputs[i]] = found->second;
    }
  }
  return analysis;
}

}  // namespace slapo::plan
