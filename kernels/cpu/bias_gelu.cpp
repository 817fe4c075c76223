// Fused bias add + GELU on CPU: one pass forward, one pass backward (dbias reduced per thread).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

namespace {

template <typename T>
inline T gelu(T v, bool tanh_approx) {
  if (tanh_approx) {
    const T k = T(0.7978845608028654);
    return T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
  }
  return T(0.5) * v * (T(1) + std::erf(v * T(0.7071067811865476)));
}

template <typename T>
inline T gelu_grad(T v, bool tanh_approx) {
  if (tanh_approx) {
    const T k = T(0.7978845608028654);
    T t = std::tanh(k * (v + T(0.044715) * v * v * v));
    return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * k * (T(1) + T(3) * T(0.044715) * v * v);
  }
  T cdf = T(0.5) * (T(1) + std::erf(v * T(0.7071067811865476)));
  T pdf = T(0.3989422804014327) * std::exp(T(-0.5) * v * v);
  return cdf + v * pdf;
}

}  // namespace

// Cache-sized blocks of rows: the bias add and the GELU run on a block while it is in cache, with
// ATen's vectorised GELU; blocks run in parallel (ATen runs single-threaded inside each).
constexpr int64_t kBlockElements = 16384;

at::Tensor bias_gelu_forward(const at::Tensor& x_in, const at::Tensor& bias_in, bool tanh_approx) {
  auto x = x_in.contiguous();
  auto bias = bias_in.contiguous();
  const int64_t cols = bias.numel(), rows = x.numel() / cols;
  auto x2 = x.view({rows, cols});
  auto y = at::empty_like(x2);
  const int64_t block = std::max<int64_t>(1, kBlockElements / cols);
  const char* approximate = tanh_approx ? "tanh" : "none";
  at::parallel_for(0, (rows + block - 1) / block, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      int64_t r = k * block, n = std::min(block, rows - r);
      auto out = y.narrow(0, r, n);
      at::add_out(out, x2.narrow(0, r, n), bias);
      at::gelu_(out, approximate);
    }
  });
  return y.view(x.sizes());
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& dy_in, const at::Tensor& x_in,
                                                      const at::Tensor& bias_in, bool tanh_approx) {
  auto dy = dy_in.contiguous(), x = x_in.contiguous(), bias = bias_in.contiguous();
  const int64_t cols = bias.numel(), rows = x.numel() / cols;
  auto x2 = x.view({rows, cols}), dy2 = dy.view({rows, cols});
  auto dx = at::empty_like(x2);
  const int64_t block = std::max<int64_t>(1, kBlockElements / cols);
  const int64_t blocks = (rows + block - 1) / block;
  auto partial = at::zeros({blocks, cols}, x.options());  // per-block dbias, summed at the end
  const char* approximate = tanh_approx ? "tanh" : "none";
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      int64_t r = k * block, n = std::min(block, rows - r);
      auto pre = x2.narrow(0, r, n) + bias;
      auto out = dx.narrow(0, r, n);
      at::gelu_backward_out(out, dy2.narrow(0, r, n), pre, approximate);
      auto row = partial[k];
      at::sum_out(row, out, {0});
    }
  });
  return {dx.view(x.sizes()), partial.sum(0)};
}

}  // namespace slapo::kernels::cpu
