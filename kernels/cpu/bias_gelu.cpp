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

at::Tensor bias_gelu_forward(const at::Tensor& x_in, const at::Tensor& bias_in, bool tanh_approx) {
  auto x = x_in.contiguous();
  auto bias = bias_in.contiguous();
  auto y = at::empty_like(x);
  const int64_t cols = bias.numel(), rows = x.numel() / cols;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bias_gelu_forward", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* bp = bias.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        for (int64_t c = 0; c < cols; ++c) yp[r * cols + c] = gelu(xp[r * cols + c] + bp[c], tanh_approx);
    });
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& dy_in, const at::Tensor& x_in,
                                                      const at::Tensor& bias_in, bool tanh_approx) {
  auto dy = dy_in.contiguous(), x = x_in.contiguous(), bias = bias_in.contiguous();
  auto dx = at::empty_like(x);
  at::Tensor dbias;
  const int64_t cols = bias.numel(), rows = x.numel() / cols;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bias_gelu_backward", [&] {
    const scalar_t* dyp = dy.data_ptr<scalar_t>();
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* bp = bias.data_ptr<scalar_t>();
    scalar_t* dxp = dx.data_ptr<scalar_t>();
    dbias = rows_with_column_sum<scalar_t>(rows, cols, x.options(), [&](int64_t r, scalar_t* acc) {
      for (int64_t c = 0; c < cols; ++c) {
        scalar_t g = dyp[r * cols + c] * gelu_grad(xp[r * cols + c] + bp[c], tanh_approx);
        dxp[r * cols + c] = g;
        acc[c] += g;
      }
    });
  });
  return {dx, dbias};
}

}  // namespace slapo::kernels::cpu
