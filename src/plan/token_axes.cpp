// Token dimensions through a traced graph: views and transposes move them, a matmul keeps its left
// operand's rows, element-wise ops broadcast them.
#include "plan/token_axes.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <set>
#include <string>

namespace slapo::plan {

std::optional<std::vector<int64_t>> sizes_of(const torch::jit::Value* v) {
  auto t = v->type()->cast<c10::TensorType>();
  auto sizes = t ? t->sizes().concrete_sizes() : c10::nullopt;
  if (!sizes) return std::nullopt;
  return *sizes;
}

std::optional<std::vector<int64_t>> int_list(const torch::jit::Value* v) {
  if (auto constant = torch::jit::constant_as<std::vector<int64_t>>(v)) return *constant;
  if (v->node()->kind() != c10::prim::ListConstruct) return std::nullopt;
  std::vector<int64_t> out;
  for (auto* item : v->node()->inputs()) {
    auto i = torch::jit::constant_as<int64_t>(item);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

namespace {

// Ops that compute each element (or each token's row) on its own.
const std::set<std::string> kTokenwise = {
    "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::gelu", "aten::relu", "aten::silu", "aten::tanh",
    "aten::sigmoid", "aten::pow", "aten::rsqrt", "aten::sqrt", "aten::neg", "aten::exp", "aten::to", "aten::type_as",
    "aten::contiguous", "aten::clone", "aten::dropout", "aten::layer_norm", "aten::where", "aten::masked_fill",
    "prim::ListConstruct", "prim::ListUnpack", "prim::TupleConstruct", "prim::TupleUnpack"};
const std::set<std::string> kReductions = {"aten::mean", "aten::sum", "aten::var", "aten::norm"};
const std::set<std::string> kSoftmax = {"aten::softmax", "aten::_softmax", "aten::log_softmax"};
// Ops whose output has the input's elements in order: the tokens stay in a dimension of their own
// when the sizes before it are kept.
const std::set<std::string> kReshapes = {"aten::view", "aten::reshape", "aten::_unsafe_view", "aten::flatten",
                                         "aten::unflatten"};
const std::set<std::string> kSplits = {"aten::split", "aten::chunk", "aten::split_with_sizes"};

int64_t rank_of(const torch::jit::Value* v) {
  auto sizes = sizes_of(v);
  return sizes ? int64_t(sizes->size()) : -1;
}

int64_t normalised(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }

std::optional<int64_t> int_at(const torch::jit::Node* node, size_t i) {
  if (node->inputs().size() <= i) return std::nullopt;
  auto v = torch::jit::constant_as<int64_t>(node->input(i));
  return v ? std::optional<int64_t>(*v) : std::nullopt;
}

bool is_matmul(const std::string& kind) { return kind == "aten::matmul" || kind == "aten::bmm"; }

// The output dimension of a reshape that holds input dimension `axis` whole: the one with the same
// size and the same product of sizes before it.
int64_t reshaped_axis(const std::vector<int64_t>& in, const std::vector<int64_t>& out, int64_t axis) {
  double before = 1;
  for (int64_t d = 0; d < axis; ++d) before *= double(in[size_t(d)]);
  double out_before = 1;
  for (size_t j = 0; j < out.size(); ++j) {
    if (out_before == before && out[j] == in[size_t(axis)]) return int64_t(j);
    out_before *= double(out[j]);
  }
  return -1;
}

// The token axis of `node`'s first output, from its inputs' (-1: the tokens are mixed or lost).
int64_t output_axis(const torch::jit::Node* node, const TokenAxes& axes) {
  std::string kind = node->kind().toQualString();
  const torch::jit::Value* out = node->outputs().empty() ? nullptr : node->output(0);
  auto axis_of = [&](const torch::jit::Value* v) {
    auto found = axes.find(v);
    return found == axes.end() ? int64_t(-2) : found->second;  // -2: not computed from the input
  };
  const int64_t first = node->inputs().empty() ? -2 : axis_of(node->input(0));
  const int64_t in_rank = node->inputs().empty() ? -1 : rank_of(node->input(0));
  const int64_t out_rank = out ? rank_of(out) : -1;
  if (is_matmul(kind)) {  // the rows of the left operand; never the dimension it reduces over
    if (first < 0 || in_rank < 2 || first >= in_rank - 1 || out_rank < 0) return -1;
    return first + out_rank - in_rank;
  }
  if (kReshapes.count(kind)) {
    auto in = sizes_of(node->input(0)), o = out ? sizes_of(out) : std::nullopt;
    return first < 0 || !in || !o ? -1 : reshaped_axis(*in, *o, first);
  }
  if (kind == "aten::transpose") {
    auto d0 = int_at(node, 1), d1 = int_at(node, 2);
    if (first < 0 || !d0 || !d1) return -1;
    int64_t a = normalised(*d0, in_rank), b = normalised(*d1, in_rank);
    return first == a ? b : first == b ? a : first;
  }
  if (kind == "aten::permute") {
    auto dims = node->inputs().size() > 1 ? int_list(node->input(1)) : std::nullopt;
    if (first < 0 || !dims) return -1;
    for (size_t j = 0; j < dims->size(); ++j)
      if (normalised((*dims)[j], in_rank) == first) return int64_t(j);
    return -1;
  }
  if (kind == "aten::unsqueeze") {
    auto d = int_at(node, 1);
    if (first < 0 || !d) return -1;
    return first + (normalised(*d, in_rank + 1) <= first ? 1 : 0);
  }
  if (kind == "aten::select" || kind == "aten::squeeze") {
    auto d = int_at(node, 1);
    if (first < 0 || !d) return -1;
    if (out_rank == in_rank) return first;  // a squeeze of a dimension that is not 1
    int64_t dim = normalised(*d, in_rank);
    return dim == first ? -1 : first - (dim < first ? 1 : 0);
  }
  if (kind == "aten::slice" || kind == "aten::cat" || kSplits.count(kind) || kSoftmax.count(kind)) {
    auto d = int_at(node, kSplits.count(kind) ? 2 : 1);
    if (first < 0 || !d || normalised(*d, in_rank) == first) return -1;
    return first;
  }
  if (kReductions.count(kind)) {
    auto dims = node->inputs().size() > 1 ? int_list(node->input(1)) : std::nullopt;
    if (first < 0 || !dims || dims->empty()) return -1;
    int64_t shift = 0;
    for (auto d : *dims) {
      int64_t dim = normalised(d, in_rank);
      if (dim == first) return -1;
      shift += dim < first;
    }
    return out_rank == in_rank ? first : first - shift;  // keepdim or not
  }
  if (node->kind() == c10::prim::ListUnpack || node->kind() == c10::prim::TupleUnpack) return first;
  if (node->kind() == c10::prim::ListConstruct || node->kind() == c10::prim::TupleConstruct) {
    int64_t axis = -2;  // a list of tensors: the axis they share
    for (auto* v : node->inputs()) {
      int64_t a = axis_of(v);
      if (a == -2) continue;
      if (a < 0 || (axis != -2 && a != axis)) return -1;
      axis = a;
    }
    return axis;
  }
  // element-wise and the rest: the computed inputs' axes, aligned to the output as broadcasting does
  int64_t axis = -2;
  for (auto* v : node->inputs()) {
    int64_t a = axis_of(v);
    if (a == -2) continue;
    int64_t rank = rank_of(v);
    if (a < 0 || rank < 0 || out_rank < 0) return -1;
    int64_t aligned = a + out_rank - rank;
    if (axis != -2 && aligned != axis) return -1;
    axis = aligned;
  }
  return axis;
}

}  // namespace

TokenAxes trace_token_axes(const torch::jit::Graph& g, int64_t input_axis) {
  TokenAxes axes;
  if (g.inputs().empty()) return axes;
  axes[g.inputs()[0]] = input_axis;
  for (auto* node : g.nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    std::string kind = node->kind().toQualString();
    if (kind == "slapo::call_module") {
      auto* list = node->input(1)->node();
      const torch::jit::Value* x = list->inputs().empty() ? nullptr : list->inputs()[0];
      auto found = x ? axes.find(x) : axes.end();
      if (found == axes.end()) continue;
      auto in = sizes_of(x), out = sizes_of(node->output());
      int64_t a = found->second;
      // a leaf keeps its input's leading dimensions; a projection whose partial sums are
      // reduce-scattered hands on tokens along the module input's axis, whatever it was given
      bool kept = a >= 0 && in && out && in->size() == out->size() && a < int64_t(in->size()) - 1 &&
                  (*in)[size_t(a)] == (*out)[size_t(a)];
      bool like_input = out && rank_of(g.inputs()[0]) == int64_t(out->size());
      axes[node->output()] = kept ? a : like_input ? input_axis : -1;
      continue;
    }
    bool computed = false;
    for (auto* v : node->inputs()) computed = computed || axes.count(v);
    if (!computed) continue;
    int64_t axis = output_axis(node, axes);
    for (auto* out : node->outputs()) axes[out] = axis;
  }
  return axes;
}

bool computes_on_tokens(const torch::jit::Node* node, const TokenAxes& axes,
                        const std::function<bool(const torch::jit::Value*)>& split) {
  std::string kind = node->kind().toQualString();
  const torch::jit::Value* in = node->inputs().empty() ? nullptr : node->input(0);
  auto found = in ? axes.find(in) : axes.end();
  if (kind == "aten::size") {  // a size of another dimension than the tokens'
    auto d = int_at(node, 1);
    return found != axes.end() && found->second >= 0 && d && normalised(*d, rank_of(in)) != found->second;
  }
  bool known = kTokenwise.count(kind) || kReductions.count(kind) || kSoftmax.count(kind) || kReshapes.count(kind) ||
               kSplits.count(kind) || kind == "aten::transpose" || kind == "aten::permute" ||
               kind == "aten::unsqueeze" || kind == "aten::squeeze" || kind == "aten::select" || kind == "aten::slice" ||
               kind == "aten::cat";
  if (!known) return false;
  // every split input has its tokens in one dimension, and so has every tensor output
  for (auto* v : node->inputs()) {
    if (!split(v)) continue;
    auto a = axes.find(v);
    if (a == axes.end() || a->second < 0) return false;
  }
  int64_t out_axis = -1;
  for (auto* out : node->outputs()) {
    if (!out->type()->cast<c10::TensorType>() && !out->type()->isSubtypeOf(*c10::ListType::ofTensors())) continue;
    auto a = axes.find(out);
    if (a == axes.end() || a->second < 0) return false;
    out_axis = a->second;
  }
  // the other tensors broadcast along the tokens: size 1 there, or not reaching that dimension
  const int64_t out_rank = node->outputs().empty() ? -1 : rank_of(node->output(0));
  for (auto* v : node->inputs()) {
    if (split(v)) continue;
    auto sizes = sizes_of(v);
    if (!sizes || out_axis < 0 || out_rank < 0) continue;
    int64_t d = out_axis - (out_rank - int64_t(sizes->size()));
    if (d >= 0 && d < int64_t(sizes->size()) && (*sizes)[size_t(d)] != 1) return false;
  }
  return true;
}

bool matmul_on_tokens(const torch::jit::Node* node, const TokenAxes& axes) {
  if (!is_matmul(node->kind().toQualString())) return false;
  auto lhs = axes.find(node->input(0)), out = axes.find(node->output());
  return lhs != axes.end() && lhs->second >= 0 && out != axes.end() && out->second >= 0;
}

}  // namespace slapo::plan
