// What each aten op's backward needs, from its derivative formula (PyTorch's derivatives.yaml):
// its inputs, its output, or neither.
#include "plan/saved_tensors.h"

#include <torch/csrc/jit/ir/ir.h>

#include <set>
#include <string>

namespace slapo::plan {

namespace {

// outputs that view their input (or are no tensor): no memory of their own
const std::set<std::string> kViews = {"aten::view", "aten::reshape", "aten::permute", "aten::transpose",
                                      "aten::t", "aten::expand", "aten::slice", "aten::select", "aten::unsqueeze",
                                      "aten::squeeze", "aten::flatten", "aten::unflatten", "aten::split",
                                      "aten::chunk", "aten::unbind", "aten::narrow", "aten::contiguous",
                                      "prim::ListConstruct", "prim::ListUnpack", "prim::TupleConstruct",
                                      "prim::TupleUnpack", "aten::size", "aten::detach", "aten::_unsafe_view"};
// backward reads the output
const std::set<std::string> kKeepOutput = {"aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::tanh",
                                           "aten::sigmoid", "aten::relu", "aten::exp", "aten::rsqrt", "aten::sqrt"};
// backward reads the tensor inputs
const std::set<std::string> kKeepInputs = {"aten::matmul", "aten::bmm", "aten::mm", "aten::linear", "aten::mul",
                                           "aten::div", "aten::gelu", "aten::silu", "aten::pow", "aten::layer_norm",
                                           "aten::where", "aten::masked_fill", "aten::embedding",
                                           "aten::cross_entropy_loss", "aten::baddbmm", "aten::addmm"};
// backward needs neither (sizes and scalars at most)
const std::set<std::string> kKeepNothing = {"aten::add", "aten::sub", "aten::neg", "aten::to", "aten::type_as",
                                            "aten::clone", "aten::mean", "aten::sum", "aten::cat",
                                            "aten::repeat_interleave", "aten::dropout", "aten::zeros",
                                            "aten::ones", "aten::triu", "aten::tril", "aten::arange"};

bool is_tensor(const torch::jit::Value* v) { return static_cast<bool>(v->type()->cast<c10::TensorType>()); }
bool is_view_op(const torch::jit::Node* node) { return kViews.count(node->kind().toQualString()) > 0; }

}  // namespace

std::unordered_set<const torch::jit::Value*> saved_for_backward(
    const torch::jit::Graph& g, const std::function<bool(const torch::jit::Node*)>& is_dropout) {
  std::unordered_set<const torch::jit::Value*> saved;
  // a view's memory is its base's: follow views back to the op that wrote the tensor
  auto keep = [&](const torch::jit::Value* v) {
    while (is_tensor(v) && is_view_op(v->node()) && !v->node()->inputs().empty()) v = v->node()->input(0);
    if (is_tensor(v)) saved.insert(v);
  };
  for (auto* node : g.nodes()) {
    if (node->kind() == c10::prim::Constant || is_view_op(node)) continue;
    std::string kind = node->kind().toQualString();
    if (kind == "slapo::call_module") {
      if (is_dropout(node)) {
        keep(node->output());  // its mask, the size of its output
      } else if (auto* list = node->input(1)->node(); !list->inputs().empty()) {
        keep(list->inputs()[0]);  // a projection's input
      }
    } else if (kKeepOutput.count(kind)) {
      for (auto* out : node->outputs()) keep(out);
    } else if (kKeepInputs.count(kind)) {
      for (auto* in : node->inputs()) keep(in);
    } else if (!kKeepNothing.count(kind)) {
      for (auto* out : node->outputs()) keep(out);
    }
  }
  return saved;
}

}  // namespace slapo::plan
