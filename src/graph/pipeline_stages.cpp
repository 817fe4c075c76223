// Splitting a traced graph at stage-ending leaf calls into one graph per pipeline stage.
#include "graph/pipeline_stages.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <functional>
#include <map>
#include <sstream>
#include <unordered_map>

#include "core/error.h"

namespace slapo {

namespace {

using JNode = torch::jit::Node;
using JValue = torch::jit::Value;

bool is_call(const JNode* n) {
  std::string kind = n->kind().toQualString();
  return kind == "slapo::call_module" || kind == "slapo::call_module_list";
}

std::string call_target(const JNode* n) {
  auto id = torch::jit::constant_as<int64_t>(n->inputs()[0]);
  return id ? leaf_path(*id) : std::string();
}

// A value that crosses a cut: defined in stage `from`, last needed in stage `to`.
struct Crossing {
  JValue* value;
  int from, to;
};

}  // namespace

StageGraph::StageGraph(int index, std::shared_ptr<torch::jit::Graph> graph, std::vector<StageInput> inputs,
                       std::vector<at::Tensor> params, int received, int sent, std::vector<std::string> leaves)
    : index_(index), graph_(std::move(graph)), inputs_(std::move(inputs)), params_(std::move(params)),
      received_(received), sent_(sent), leaves_(std::move(leaves)) {
  function_ = std::make_unique<torch::jit::GraphFunction>(fmt::format("slapo_stage_{}", index_), graph_, nullptr);
}

StageGraph::~StageGraph() = default;

std::vector<at::Tensor> StageGraph::run(const Values& model_inputs, const std::vector<at::Tensor>& received) {
  if (static_cast<int>(received.size()) != received_)
    throw Error(fmt::format("pipeline stage {}: received {} tensors, expects {}", index_, received.size(), received_));
  torch::jit::Stack stack;
  for (auto& in : inputs_) {
    switch (in.kind) {
      case StageInput::Received: stack.emplace_back(received[in.index]); break;
      case StageInput::ModelInput:
        if (in.index >= static_cast<int>(model_inputs.size()))
          throw Error(fmt::format("pipeline stage {}: needs model input {}, got {} inputs", index_, in.index + 1,
                                  model_inputs.size()));
        stack.push_back(model_inputs[in.index]);
        break;
      case StageInput::Param: stack.emplace_back(params_[in.index]); break;
    }
  }
  Value out = (*function_)(std::move(stack));
  std::vector<at::Tensor> tensors;
  for (auto& v : out.toTupleRef().elements()) tensors.push_back(v.toTensor());
  return tensors;
}

std::vector<at::Tensor> StageGraph::direct_params() const {
  std::vector<at::Tensor> out;
  for (auto& in : inputs_)
    if (in.kind == StageInput::Param) out.push_back(params_[in.index]);
  return out;
}

std::string StageGraph::str() const {
  std::ostringstream out;
  out << *graph_;
  return out.str();
}

std::vector<std::shared_ptr<StageGraph>> split_stages(const TracedGraph& traced, const std::vector<std::string>& cut_after,
                                                      const std::string& where) {
  auto& graph = *traced.graph();
  const size_t n_model_inputs = traced.input_shapes().size();

  // Each node's stage: a stage ends with the call of a cut leaf.
  std::unordered_map<const JNode*, int> stage_of;
  std::map<std::string, int> calls;
  for (auto& path : cut_after) calls[path] = 0;
  std::vector<int> calls_per_stage{0};
  for (auto* n : graph.nodes()) {
    // the tensors of a leaf that returns several (its list unpacked) are its stage's outputs
    if (n->kind() == c10::prim::ListUnpack && is_call(n->input(0)->node())) {
      stage_of[n] = stage_of[n->input(0)->node()];
      continue;
    }
    stage_of[n] = static_cast<int>(calls_per_stage.size()) - 1;
    if (!is_call(n)) continue;
    ++calls_per_stage.back();
    auto cut = calls.find(call_target(n));
    if (cut != calls.end() && ++cut->second == 1) calls_per_stage.push_back(0);
  }
  for (auto& [path, count] : calls) {
    if (count == 0)
      throw Error(fmt::format("cut_pipeline_stage: {} is not called as a leaf in the trace of {}; cut after a module "
                              "on the path to the layers (a layer, or a module beside the layer list)", path, where));
    if (count > 1)
      throw Error(fmt::format("cut_pipeline_stage: {} is called {} times in {}; a stage can end only after a module "
                              "called once", path, count, where));
  }
  const int n_stages = static_cast<int>(calls_per_stage.size());
  for (int s = 0; s < n_stages; ++s)
    if (calls_per_stage[s] == 0)
      throw Error(fmt::format("cut_pipeline_stage: stage {} of {} would call no module (the cuts are {}); move the "
                              "cut so that every stage runs a layer", s, where, fmt::join(cut_after, ", ")));

  // Values from constants and model inputs alone are recomputed where needed, never sent.
  std::unordered_map<const JValue*, bool> memo;
  std::function<bool(const JValue*)> recomputable = [&](const JValue* v) {
    auto found = memo.find(v);
    if (found != memo.end()) return found->second;
    const JNode* n = v->node();
    bool r;
    if (n->kind() == c10::prim::Param) r = v->offset() < n_model_inputs;
    else if (is_call(n) || n->isNondeterministic()) r = false;
    else {
      r = true;
      for (auto* in : n->inputs())
        if (!recomputable(in)) {
          r = false;
          break;
        }
    }
    return memo[v] = r;
  };

  std::vector<Crossing> crossings;
  for (auto* n : graph.nodes()) {
    for (auto* v : n->outputs()) {
      if (recomputable(v)) continue;
      int last = stage_of[n];
      for (auto& use : v->uses())
        last = std::max(last, use.user == graph.return_node() ? n_stages - 1 : stage_of[use.user]);
      if (last == stage_of[n]) continue;
      if (!v->type()->cast<c10::TensorType>())
        throw Error(fmt::format("cut_pipeline_stage: %{} ({}) of {} would cross from stage {} to stage {}, and only "
                                "tensors travel between stages; move the cut", v->debugName(), v->type()->str(), where,
                                stage_of[n], last));
      crossings.push_back({v, stage_of[n], last});
    }
  }
  // What stage s sends to s + 1: every crossing value defined by then and needed later.
  auto boundary = [&](int s) {
    std::vector<JValue*> out;
    for (auto& c : crossings)
      if (c.from <= s && s < c.to) out.push_back(c.value);
    return out;
  };

  std::vector<std::shared_ptr<StageGraph>> stages;
  for (int s = 0; s < n_stages; ++s) {
    auto g = std::make_shared<torch::jit::Graph>();
    std::unordered_map<const JValue*, JValue*> env;
    std::vector<StageInput> inputs;
    auto received = s > 0 ? boundary(s - 1) : std::vector<JValue*>{};
    for (size_t i = 0; i < received.size(); ++i) {
      auto* in = g->addInput();
      in->setType(received[i]->type());
      env[received[i]] = in;
      inputs.push_back({StageInput::Received, static_cast<int>(i)});
    }
    std::function<JValue*(JValue*)> get;
    auto emit = [&](JNode* n) {
      auto* clone = g->createClone(n, [&](JValue* v) { return get(v); });
      g->insertNode(clone);
      for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = clone->outputs()[i];
    };
    get = [&](JValue* v) -> JValue* {
      auto found = env.find(v);
      if (found != env.end()) return found->second;
      if (v->node()->kind() == c10::prim::Param) {
        auto* in = g->addInput();
        in->setType(v->type());
        bool model_input = v->offset() < n_model_inputs;
        inputs.push_back({model_input ? StageInput::ModelInput : StageInput::Param,
                          static_cast<int>(model_input ? v->offset() : v->offset() - n_model_inputs)});
        return env[v] = in;
      }
      if (!recomputable(v))
        throw Error(fmt::format("cut_pipeline_stage: internal: %{} is needed in stage {} of {} but was not sent",
                                v->debugName(), s, where));
      emit(v->node());
      return env.at(v);
    };
    std::vector<std::string> leaves;
    for (auto* n : graph.nodes()) {
      if (stage_of[n] != s || (!n->outputs().empty() && recomputable(n->outputs()[0]))) continue;
      emit(n);
      if (is_call(n)) leaves.push_back(call_target(n));
    }
    std::vector<JValue*> outs;
    if (s + 1 < n_stages)
      for (auto* v : boundary(s)) outs.push_back(get(v));
    else
      for (auto* v : graph.outputs()) outs.push_back(get(v));
    g->registerOutput(g->insertNode(g->createTuple(outs))->output());
    torch::jit::EliminateDeadCode(g);
    stages.push_back(std::make_shared<StageGraph>(s, g, inputs, traced.params(), static_cast<int>(received.size()),
                                                  static_cast<int>(outs.size()), leaves));
  }
  return stages;
}

}  // namespace slapo
