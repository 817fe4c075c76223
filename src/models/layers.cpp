// Leaf layers and containers of the model zoo.
#include "models/layers.h"

#include <cmath>

#include "core/error.h"
#include "models/meta_kernels.h"
#include "models/transformer_ops.h"

namespace slapo {

namespace {
at::Tensor new_param(at::IntArrayRef shape, const at::TensorOptions& opts) {
  return torch::empty(shape, opts).requires_grad_(true);
}
std::string shape_str(const at::Tensor& t) { return fmt::format("{}", fmt::join(t.sizes(), ", ")); }

// A projection's input ends in the width its weight takes: said here with both numbers, before
// ATen's "mat1 and mat2 shapes cannot be multiplied".
void check_input_width(const at::Tensor& x, int64_t in_features, const char* layer) {
  if (x.dim() == 0 || x.size(-1) != in_features)
    throw Error(fmt::format("{}: the input's last dimension is {}, expected {} (in_features); input shape [{}]", layer,
                            x.dim() ? x.size(-1) : 0, in_features, shape_str(x)));
}
}  // namespace

// ---- Linear ----

Linear::Linear(int64_t in, int64_t out, bool bias, const at::TensorOptions& opts) : ModuleBase("Linear") {
  set_param("weight", new_param({out, in}, opts));
  if (bias) set_param("bias", new_param({out}, opts));
}

std::string Linear::describe() const {
  auto w = param("weight");
  return fmt::format("in_features={}, out_features={}, bias={}", w.size(1), w.size(0),
                     has_param("bias") ? "true" : "false");
}

namespace {
bool bias_after_sync(const Module& m, int64_t input_axis) {
  auto w = m.meta().shards.find("weight");
  return w != m.meta().shards.end() && w->second.axis == input_axis && m.has_param("bias") &&
         !m.meta().shards.count("bias");
}
}  // namespace

bool Linear::row_parallel() const { return bias_after_sync(*this, 1); }

Value Linear::forward(Values args) {
  auto x = tensor_arg(args, 0, "Linear", "input");
  check_input_width(x, param("weight").size(1), "Linear");
  bool with_bias = has_param("bias") && !row_parallel();
  if (meta().decomposed) {  // separate ops, so a trace shows the bias add for fusion
    auto y = at::matmul(x, param("weight").t());
    return with_bias ? y + param("bias") : y;
  }
  return at::linear(x, param("weight"), with_bias ? param("bias") : at::Tensor());
}

Value Linear::finish(Value out) {
  if (row_parallel() && out.isTensor()) return out.toTensor() + param("bias");
  return out;
}

// ---- Conv1D ----

Conv1D::Conv1D(int64_t in, int64_t out, const at::TensorOptions& opts) : ModuleBase("Conv1D") {
  set_param("weight", new_param({in, out}, opts));
  set_param("bias", new_param({out}, opts));
}

std::string Conv1D::describe() const {
  auto w = param("weight");
  return fmt::format("nx={}, nf={}", w.size(0), w.size(1));
}

bool Conv1D::row_parallel() const { return bias_after_sync(*this, 0); }

Value Conv1D::forward(Values args) {
  auto x = tensor_arg(args, 0, "Conv1D", "input");
  auto w = param("weight");
  check_input_width(x, w.size(0), "Conv1D");
  auto out_shape = x.sizes().vec();
  out_shape.back() = w.size(1);
  if (meta().decomposed) {
    auto y = at::matmul(x, w);
    return row_parallel() ? y : y + param("bias");
  }
  auto flat = x.reshape({-1, x.size(-1)});
  if (row_parallel()) return at::mm(flat, w).view(out_shape);
  return at::addmm(param("bias"), flat, w).view(out_shape);
}

Value Conv1D::finish(Value out) {
  if (row_parallel() && out.isTensor()) return out.toTensor() + param("bias");
  return out;
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(int64_t n, double eps_, const at::TensorOptions& opts)
    : ModuleBase("LayerNorm"), eps(eps_) {
  if (opts.device().is_meta()) register_meta_kernels();  // LibTorch's C++ has no meta layer_norm
  set_param("weight", new_param({n}, opts));
  set_param("bias", new_param({n}, opts));
}

std::string LayerNorm::describe() const { return fmt::format("({}), eps={:g}", shape_str(param("weight")), eps); }

Value LayerNorm::forward(Values args) {
  auto x = tensor_arg(args, 0, "LayerNorm", "input");
  auto w = param("weight");
  return at::layer_norm(x, w.sizes(), w, param("bias"), eps);
}

// ---- RMSNorm ----

RMSNorm::RMSNorm(int64_t n, double eps_, const at::TensorOptions& opts, std::string type_name)
    : ModuleBase(std::move(type_name)), eps(eps_) {
  set_param("weight", new_param({n}, opts));
}

std::string RMSNorm::describe() const { return fmt::format("({}), eps={:g}", shape_str(param("weight")), eps); }

Value RMSNorm::forward(Values args) {
  auto x = tensor_arg(args, 0, type_name().c_str(), "input");
  auto h = x.to(at::kFloat);
  h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return param("weight") * h.to(x.scalar_type());
}

// ---- Embedding ----

Embedding::Embedding(int64_t num, int64_t dim, c10::optional<int64_t> padding_idx_,
                     const at::TensorOptions& opts)
    : ModuleBase("Embedding"), padding_idx(padding_idx_) {
  set_param("weight", new_param({num, dim}, opts));
}

std::string Embedding::describe() const {
  auto w = param("weight");
  std::string s = fmt::format("{}, {}", w.size(0), w.size(1));
  if (padding_idx) s += fmt::format(", padding_idx={}", *padding_idx);
  return s;
}

Value Embedding::forward(Values args) {
  auto ids = tensor_arg(args, 0, "Embedding", "indices");
  if (at::isFloatingType(ids.scalar_type()))
    throw Error(fmt::format("Embedding: indices must be integers, got {}", c10::toString(ids.scalar_type())));
  auto vocab = meta().shards.find("weight");
  if (vocab != meta().shards.end() && vocab->second.axis == 0) {
    // Vocab-parallel (Megatron): this rank holds rows [start, start + rows); other ids look up
    // zeros, and a fwd_post all_reduce sums the ranks' parts.
    int64_t rows = param("weight").size(0), start = vocab->second.rank * rows;
    auto outside = (ids < start).logical_or(ids >= start + rows);
    auto local = (ids - start).masked_fill(outside, 0);
    // the padding row learns nothing on the rank that holds it, as unsharded
    int64_t local_pad = padding_idx && *padding_idx >= start && *padding_idx < start + rows ? *padding_idx - start : -1;
    return at::embedding(param("weight"), local, local_pad).masked_fill(outside.unsqueeze(-1), 0.0);
  }
  // padding_idx only masks the gradient of that row, as torch.nn.Embedding does.
  try {
    return at::embedding(param("weight"), ids, padding_idx.value_or(-1));
  } catch (const c10::IndexError&) {  // CPU: name the id and the table size rather than "in self"
    int64_t rows = param("weight").size(0);
    auto bad = id_out_of_range(ids, rows);
    if (!bad) throw;
    throw Error(fmt::format("Embedding: token id {} is out of range for a table of {} rows (ids from 0 to {})", *bad,
                            rows, rows - 1));
  }
}

// ---- Dropout ----

Dropout::Dropout(double p_) : ModuleBase("Dropout"), p(p_) {}

std::string Dropout::describe() const { return fmt::format("p={:g}", p); }

Value Dropout::forward(Values args) {
  auto x = tensor_arg(args, 0, "Dropout", "input");
  if (!is_training() || p == 0.0) return x;
  return at::dropout(x, p, /*train=*/true);
}

c10::optional<double> plain_dropout_rate(const Module& m) {
  auto* dropout = dynamic_cast<const Dropout*>(&m);
  if (!dropout || !m.runs_plain()) return c10::nullopt;
  return m.is_training() ? dropout->p : 0.0;
}

// ---- Activation ----

std::shared_ptr<Activation> Activation::from_hf_name(const std::string& hf_name) {
  if (hf_name == "gelu") return std::make_shared<Activation>("GELUActivation", "gelu");
  if (hf_name == "gelu_new") return std::make_shared<Activation>("NewGELUActivation", "gelu_tanh");
  if (hf_name == "gelu_pytorch_tanh") return std::make_shared<Activation>("PytorchGELUTanh", "gelu_tanh");
  if (hf_name == "relu") return std::make_shared<Activation>("ReLU", "relu");
  if (hf_name == "silu" || hf_name == "swish") return std::make_shared<Activation>("SiLU", "silu");
  if (hf_name == "tanh") return std::make_shared<Activation>("Tanh", "tanh");
  throw Error(fmt::format(
      "activation: unknown hidden_act '{}' (choices: gelu, gelu_new, gelu_pytorch_tanh, relu, silu, swish, tanh)",
      hf_name));
}

Activation::Activation(std::string type_name, std::string fn_) : ModuleBase(std::move(type_name)), fn(std::move(fn_)) {}

Value Activation::forward(Values args) {
  auto x = tensor_arg(args, 0, type_name().c_str(), "input");
  if (fn == "gelu") return at::gelu(x);
  if (fn == "gelu_tanh") return at::gelu(x, "tanh");
  if (fn == "relu") return at::relu(x);
  if (fn == "silu") return at::silu(x);
  return at::tanh(x);
}

// ---- Identity, Sequential, ModuleList ----

Value Identity::forward(Values args) { return args.empty() ? Value() : args[0]; }

Sequential::Sequential(std::vector<std::shared_ptr<Module>> modules) : ModuleBase("Sequential") {
  for (size_t i = 0; i < modules.size(); ++i) set_child(std::to_string(i), std::move(modules[i]));
}

Value Sequential::forward(Values args) {
  auto children = children_in_order();
  if (children.empty()) return args.empty() ? Value() : args[0];
  Value out = (*children[0].second)(std::move(args));
  for (size_t i = 1; i < children.size(); ++i) out = (*children[i].second)(Values{out});
  return out;
}

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> modules) : ModuleBase("ModuleList") {
  for (size_t i = 0; i < modules.size(); ++i) set_child(std::to_string(i), std::move(modules[i]));
}

Value ModuleList::forward(Values) {
  throw Error("ModuleList: is not callable; its parent calls its children one by one");
}

}  // namespace slapo
