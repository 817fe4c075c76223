// Tensor wrappers over the raw CUDA launchers: contiguous float32 inputs, outputs allocated
// here, launches on the current stream, launch errors raised with the op's name.
#include "cuda/torch_kernels.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include "core/error.h"
#include "cuda/launchers.h"

namespace slapo::kernels::cuda_tensors {

namespace {

void* stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

const float* in(const at::Tensor& t) { return t.data_ptr<float>(); }
float* out(at::Tensor& t) { return t.data_ptr<float>(); }

// The last check before a raw pointer reaches a kernel: a CUDA float32 tensor on the current device.
at::Tensor contiguous_float(const at::Tensor& t, const char* op) {
  if (!t.is_cuda())
    throw Error(fmt::format("{}: an input is on {}; the CUDA kernel reads CUDA tensors only", op, t.device().str()));
  if (t.get_device() != c10::cuda::current_device())
    throw Error(fmt::format("{}: an input is on {} but the current device is cuda:{}", op, t.device().str(),
                            static_cast<int>(c10::cuda::current_device())));
  if (t.scalar_type() != at::kFloat)
    throw Error(fmt::format("{}: an input is {}; the CUDA kernels take float32 tensors", op,
                            c10::toString(t.scalar_type())));
  return t.contiguous();
}

void check(int rc, const char* op) {
  if (rc != 0) throw Error(fmt::format("{}: CUDA launch failed with error {}", op, rc));
}

int64_t rows_of(const at::Tensor& t) { return t.numel() / t.size(-1); }

// Weight and bias gradients: ATen's column reduction spreads the rows over the whole GPU, where
// one thread per column (the raw launchers' fallback) leaves most of it idle.
at::Tensor column_sums(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}).sum(0); }

}  // namespace

at::Tensor bias_gelu_forward(const at::Tensor& x_in, const at::Tensor& bias_in, bool tanh_approx) {
  auto x = contiguous_float(x_in, "bias_gelu"), bias = contiguous_float(bias_in, "bias_gelu");
  auto y = at::empty_like(x);
  check(cuda::bias_gelu_forward(in(x), in(bias), out(y), rows_of(x), x.size(-1), tanh_approx, stream()), "bias_gelu");
  return y;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& dy_in, const at::Tensor& x_in,
                                                      const at::Tensor& bias_in, bool tanh_approx) {
  auto dy = contiguous_float(dy_in, "bias_gelu"), x = contiguous_float(x_in, "bias_gelu");
  auto bias = contiguous_float(bias_in, "bias_gelu");
  auto dx = at::empty_like(x);
  check(cuda::bias_gelu_backward(in(dy), in(x), in(bias), out(dx), rows_of(x), x.size(-1), tanh_approx, stream()),
        "bias_gelu");
  return {dx, dx.reshape({-1, x.size(-1)}).sum(0)};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& x_in, const at::Tensor& w_in, double eps) {
  auto x = contiguous_float(x_in, "rms_norm"), w = contiguous_float(w_in, "rms_norm");
  auto y = at::empty_like(x);
  auto inv = at::empty({rows_of(x)}, x.options());
  check(cuda::rms_norm_forward(in(x), in(w), out(y), out(inv), rows_of(x), x.size(-1), float(eps), stream()), "rms_norm");
  return {y, inv};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& dy_in, const at::Tensor& x_in,
                                                     const at::Tensor& w_in, const at::Tensor& inv_in) {
  auto dy = contiguous_float(dy_in, "rms_norm"), x = contiguous_float(x_in, "rms_norm");
  auto w = contiguous_float(w_in, "rms_norm"), inv = contiguous_float(inv_in, "rms_norm");
  auto dx = at::empty_like(x), scratch = at::empty_like(x);
  check(cuda::rms_norm_backward(in(dy), in(x), in(w), in(inv), out(dx), nullptr, out(scratch), rows_of(x), x.size(-1),
                                stream()),
        "rms_norm");
  return {dx, column_sums(scratch)};
}

at::Tensor swiglu_forward(const at::Tensor& g_in, const at::Tensor& u_in) {
  auto g = contiguous_float(g_in, "swiglu"), u = contiguous_float(u_in, "swiglu");
  auto y = at::empty_like(g);
  check(cuda::swiglu_forward(in(g), in(u), out(y), g.numel(), stream()), "swiglu");
  return y;
}

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& dy_in, const at::Tensor& g_in,
                                                   const at::Tensor& u_in) {
  auto dy = contiguous_float(dy_in, "swiglu"), g = contiguous_float(g_in, "swiglu"), u = contiguous_float(u_in, "swiglu");
  auto dg = at::empty_like(g), du = at::empty_like(u);
  check(cuda::swiglu_backward(in(dy), in(g), in(u), out(dg), out(du), g.numel(), stream()), "swiglu");
  return {dg, du};
}

at::Tensor rope_apply(const at::Tensor& x_in, const at::Tensor& cos_in, const at::Tensor& sin_in, bool inverse) {
  if (x_in.dim() != 4 || cos_in.dim() != 3 || x_in.size(-1) % 2 != 0)
    throw Error(fmt::format("rope: expected x [B, H, S, D] with even D and cos/sin [B, S, D], got [{}] and [{}]",
                            fmt::join(x_in.sizes(), ", "), fmt::join(cos_in.sizes(), ", ")));
  auto x = contiguous_float(x_in, "rope");
  auto cos = contiguous_float(cos_in.expand({x.size(0), x.size(2), x.size(3)}), "rope");
  auto sin = contiguous_float(sin_in.expand({x.size(0), x.size(2), x.size(3)}), "rope");
  auto y = at::empty_like(x);
  check(cuda::rope(in(x), in(cos), in(sin), out(y), x.size(0), x.size(1), x.size(2), x.size(3), inverse, stream()),
        "rope");
  return y;
}

std::tuple<at::Tensor, at::Tensor> attention_forward(const at::Tensor& q_in, const at::Tensor& k_in,
                                                     const at::Tensor& v_in, bool causal) {
  auto q = contiguous_float(q_in, "attention"), k = contiguous_float(k_in, "attention");
  auto v = contiguous_float(v_in, "attention");
  if (q.dim() != 4 || k.sizes() != v.sizes() || q.size(-1) > 128)
    throw Error(fmt::format("attention: the CUDA kernel takes q [B, H, Sq, D], k and v [B, H, Sk, D] with D <= 128; "
                            "got [{}], [{}]", fmt::join(q.sizes(), ", "), fmt::join(k.sizes(), ", ")));
  const int64_t bh = q.size(0) * q.size(1);
  auto o = at::empty_like(q);
  auto lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());
  check(cuda::attention_forward(in(q), in(k), in(v), out(o), out(lse), bh, q.size(2), k.size(2), q.size(3), causal,
                                stream()),
        "attention");
  return {o, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(const at::Tensor& dout_in, const at::Tensor& q_in,
                                                                  const at::Tensor& k_in, const at::Tensor& v_in,
                                                                  const at::Tensor& out_in, const at::Tensor& lse_in,
                                                                  bool causal) {
  auto dout = contiguous_float(dout_in, "attention"), q = contiguous_float(q_in, "attention");
  auto k = contiguous_float(k_in, "attention"), v = contiguous_float(v_in, "attention");
  auto o = contiguous_float(out_in, "attention"), lse = contiguous_float(lse_in, "attention");
  auto dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  check(cuda::attention_backward(in(dout), in(q), in(k), in(v), in(o), in(lse), out(dq), out(dk), out(dv),
                                 q.size(0) * q.size(1), q.size(2), k.size(2), q.size(3), causal, stream()),
        "attention");
  return {dq, dk, dv};
}

at::Tensor masked_softmax_forward(const at::Tensor& scores_in, const at::Tensor& mask, double scale) {
  auto scores = contiguous_float(scores_in, "masked_softmax");
  if (scores.dim() > 7) throw Error("masked_softmax: the CUDA kernel takes at most 7 dimensions");
  auto expanded = contiguous_float(mask.to(at::kFloat), "masked_softmax").expand_as(scores);  // strides 0 where it broadcasts: no copy
  cuda::MaskLayout layout;
  layout.dims = static_cast<int>(scores.dim() - 1);
  for (int d = 0; d < layout.dims; ++d) {
    layout.sizes[d] = scores.size(d);
    layout.strides[d] = expanded.stride(d);
  }
  layout.col_stride = expanded.stride(-1);
  auto y = at::empty_like(scores);
  check(cuda::masked_softmax_forward(in(scores), expanded.data_ptr<float>(), layout, out(y), rows_of(scores),
                                     scores.size(-1), float(scale), stream()),
        "masked_softmax");
  return y;
}

at::Tensor masked_softmax_backward(const at::Tensor& dy_in, const at::Tensor& y_in, double scale) {
  auto dy = contiguous_float(dy_in, "masked_softmax"), y = contiguous_float(y_in, "masked_softmax");
  auto ds = at::empty_like(y);
  check(cuda::masked_softmax_backward(in(dy), in(y), out(ds), rows_of(y), y.size(-1), float(scale), stream()),
        "masked_softmax");
  return ds;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> bias_dropout_add_layer_norm_forward(
    const at::Tensor& x_in, const at::Tensor& bias_in, const at::Tensor& res_in, const at::Tensor& w_in,
    const at::Tensor& lb_in, const at::Tensor& keep_in, double keep_scale, double eps) {
  const char* op = "bias_dropout_add_layer_norm";
  auto x = contiguous_float(x_in, op), bias = contiguous_float(bias_in, op), res = contiguous_float(res_in, op);
  auto w = contiguous_float(w_in, op), lb = contiguous_float(lb_in, op);
  auto keep = keep_in.defined() ? contiguous_float(keep_in.to(at::kFloat), op) : at::Tensor();
  auto y = at::empty_like(x), normed = at::empty_like(x);
  auto rstd = at::empty({rows_of(x)}, x.options());
  check(cuda::layer_norm_tail_forward(in(x), in(bias), in(res), keep.defined() ? in(keep) : nullptr, float(keep_scale),
                                      in(w), in(lb), out(y), out(normed), out(rstd), rows_of(x), x.size(-1), float(eps),
                                      stream()),
        op);
  return {y, normed, rstd};
}

std::vector<at::Tensor> bias_dropout_add_layer_norm_backward(const at::Tensor& dy_in, const at::Tensor& normed_in,
                                                             const at::Tensor& rstd_in, const at::Tensor& w_in,
                                                             const at::Tensor& keep_in, double keep_scale) {
  const char* op = "bias_dropout_add_layer_norm";
  auto dy = contiguous_float(dy_in, op), normed = contiguous_float(normed_in, op);
  auto rstd = contiguous_float(rstd_in, op), w = contiguous_float(w_in, op);
  auto keep = keep_in.defined() ? contiguous_float(keep_in.to(at::kFloat), op) : at::Tensor();
  auto dx = at::empty_like(normed), dres = at::empty_like(normed), scratch = at::empty_like(normed);
  check(cuda::layer_norm_tail_backward(in(dy), in(normed), in(rstd), in(w), keep.defined() ? in(keep) : nullptr,
                                       float(keep_scale), out(dx), nullptr, out(dres), nullptr, nullptr,
                                       out(scratch), rows_of(normed), normed.size(-1), stream()),
        op);
  return {dx, column_sums(dx), dres, column_sums(scratch), column_sums(dy)};
}

}  // namespace slapo::kernels::cuda_tensors
