// Fused bias + dropout + residual add + LayerNorm on CPU (the tail of every BERT/GPT-2 sublayer):
// one pass per row forward, keeping the normalised row's mean and 1/std, one pass backward.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

std::tuple<at::Tensor, at::Tensor, at::Tensor> bias_dropout_add_layer_norm_forward(
    const at::Tensor& x_in, const at::Tensor& bias_in, const at::Tensor& residual_in, const at::Tensor& weight_in,
    const at::Tensor& ln_bias_in, const at::Tensor& keep_in, double keep_scale, double eps) {
  auto x = x_in.contiguous(), b = bias_in.contiguous(), res = residual_in.contiguous();
  auto w = weight_in.contiguous(), lb = ln_bias_in.contiguous();
  const bool dropout = keep_in.defined();
  auto keep = dropout ? keep_in.to(x.scalar_type()).contiguous() : at::Tensor();
  const int64_t cols = w.numel(), rows = x.numel() / cols;
  auto y = at::empty_like(x);
  auto normed = at::empty_like(x);  // (h - mean) / std, for backward
  auto rstd = at::empty({rows}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bias_dropout_add_layer_norm_forward", [&] {
    const scalar_t *xp = x.data_ptr<scalar_t>(), *bp = b.data_ptr<scalar_t>(), *rp = res.data_ptr<scalar_t>();
    const scalar_t *wp = w.data_ptr<scalar_t>(), *lbp = lb.data_ptr<scalar_t>();
    const scalar_t* kp = dropout ? keep.data_ptr<scalar_t>() : nullptr;
    scalar_t *yp = y.data_ptr<scalar_t>(), *np = normed.data_ptr<scalar_t>(), *sp = rstd.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r * cols;
        double sum = 0;
        for (int64_t c = 0; c < cols; ++c) {
          scalar_t h = xp[o + c] + bp[c];
          if (kp) h = h * kp[o + c] * scalar_t(keep_scale);
          h += rp[o + c];
          np[o + c] = h;
          sum += h;
        }
        const double mean = sum / double(cols);
        double var = 0;
        for (int64_t c = 0; c < cols; ++c) var += (double(np[o + c]) - mean) * (double(np[o + c]) - mean);
        const double inv = 1.0 / std::sqrt(var / double(cols) + eps);
        sp[r] = scalar_t(inv);
        for (int64_t c = 0; c < cols; ++c) {
          np[o + c] = scalar_t((double(np[o + c]) - mean) * inv);
          yp[o + c] = np[o + c] * wp[c] + lbp[c];
        }
      }
    });
  });
  return {y, normed, rstd};
}

// LayerNorm backward: dh = rstd * (g - mean(g) - n * mean(g * n)) with g = dy * w; then dresidual
// = dh, dx = dh * keep * keep_scale, dbias = sum of dx over rows, dw = sum dy * n, dlb = sum dy.
std::vector<at::Tensor> bias_dropout_add_layer_norm_backward(const at::Tensor& dy_in, const at::Tensor& normed_in,
                                                             const at::Tensor& rstd_in, const at::Tensor& weight_in,
                                                             const at::Tensor& keep_in, double keep_scale) {
  auto dy = dy_in.contiguous(), n = normed_in.contiguous(), rstd = rstd_in.contiguous(), w = weight_in.contiguous();
  const bool dropout = keep_in.defined();
  auto keep = dropout ? keep_in.to(n.scalar_type()).contiguous() : at::Tensor();
  const int64_t cols = w.numel(), rows = n.numel() / cols;
  auto dres = at::empty_like(n), dx = at::empty_like(n);
  at::Tensor dbias, dw, dlb;
  AT_DISPATCH_FLOATING_TYPES(n.scalar_type(), "bias_dropout_add_layer_norm_backward", [&] {
    const scalar_t *dyp = dy.data_ptr<scalar_t>(), *np = n.data_ptr<scalar_t>(), *sp = rstd.data_ptr<scalar_t>();
    const scalar_t* wp = w.data_ptr<scalar_t>();
    const scalar_t* kp = dropout ? keep.data_ptr<scalar_t>() : nullptr;
    scalar_t *drp = dres.data_ptr<scalar_t>(), *dxp = dx.data_ptr<scalar_t>();
    // one accumulator row holds [dbias | dw | dlb]
    auto sums = rows_with_column_sum<scalar_t>(rows, 3 * cols, n.options(), [&](int64_t r, scalar_t* acc) {
      const int64_t o = r * cols;
      double mean_g = 0, mean_gn = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double g = double(dyp[o + c]) * double(wp[c]);
        mean_g += g;
        mean_gn += g * double(np[o + c]);
      }
      mean_g /= double(cols);
      mean_gn /= double(cols);
      for (int64_t c = 0; c < cols; ++c) {
        const double g = double(dyp[o + c]) * double(wp[c]);
        const scalar_t dh = scalar_t(double(sp[r]) * (g - mean_g - double(np[o + c]) * mean_gn));
        drp[o + c] = dh;
        dxp[o + c] = kp ? scalar_t(dh * kp[o + c] * scalar_t(keep_scale)) : dh;
        acc[c] += dxp[o + c];
        acc[cols + c] += dyp[o + c] * np[o + c];
        acc[2 * cols + c] += dyp[o + c];
      }
    });
    dbias = sums.narrow(0, 0, cols).clone();
    dw = sums.narrow(0, cols, cols).clone();
    dlb = sums.narrow(0, 2 * cols, cols).clone();
  });
  return {dx, dbias, dres, dw, dlb};
}

}  // namespace slapo::kernels::cpu
