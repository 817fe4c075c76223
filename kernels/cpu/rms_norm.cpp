// Fused RMSNorm on CPU: one pass per row forward (keeping 1/rms), one pass backward.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

std::tuple<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  auto x = x_in.contiguous(), w = weight_in.contiguous();
  const int64_t cols = w.numel(), rows = x.numel() / cols;
  auto y = at::empty_like(x);
  auto inv = at::empty({rows}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rms_norm_forward", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* wp = w.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    scalar_t* ip = inv.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* row = xp + r * cols;
        double sq = 0;  // statistics in double: as accurate as HF's float32 upcast, or better
        for (int64_t c = 0; c < cols; ++c) sq += double(row[c]) * double(row[c]);
        scalar_t inv_rms = scalar_t(1.0 / std::sqrt(sq / double(cols) + eps));
        ip[r] = inv_rms;
        for (int64_t c = 0; c < cols; ++c) yp[r * cols + c] = wp[c] * (row[c] * inv_rms);
      }
    });
  });
  return {y, inv};
}

// y = w * x * s with s = (mean(x^2) + eps)^-1/2:
//   dx = s * (w*dy) - x * s^3 * mean(w*dy * x),   dw = sum over rows of dy * x * s
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& dy_in, const at::Tensor& x_in,
                                                     const at::Tensor& weight_in, const at::Tensor& inv_in) {
  auto dy = dy_in.contiguous(), x = x_in.contiguous(), w = weight_in.contiguous(), inv = inv_in.contiguous();
  const int64_t cols = w.numel(), rows = x.numel() / cols;
  auto dx = at::empty_like(x);
  at::Tensor dweight;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rms_norm_backward", [&] {
    const scalar_t* dyp = dy.data_ptr<scalar_t>();
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* wp = w.data_ptr<scalar_t>();
    const scalar_t* ip = inv.data_ptr<scalar_t>();
    scalar_t* dxp = dx.data_ptr<scalar_t>();
    dweight = rows_with_column_sum<scalar_t>(rows, cols, x.options(), [&](int64_t r, scalar_t* acc) {
      const scalar_t* row = xp + r * cols;
      const scalar_t* drow = dyp + r * cols;
      const double s = ip[r];
      double dot = 0;
      for (int64_t c = 0; c < cols; ++c) dot += double(wp[c]) * double(drow[c]) * double(row[c]);
      const double coef = s * s * s * dot / double(cols);
      for (int64_t c = 0; c < cols; ++c) {
        dxp[r * cols + c] = scalar_t(s * double(wp[c]) * double(drow[c]) - double(row[c]) * coef);
        acc[c] += drow[c] * row[c] * scalar_t(s);
      }
    });
  });
  return {dx, dweight};
}

}  // namespace slapo::kernels::cpu
