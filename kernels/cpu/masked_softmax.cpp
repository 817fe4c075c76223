// Fused scaled, masked softmax on CPU: softmax(scores * scale + mask) over the last dim in one
// pass per row, the additive mask read through broadcasting strides (never expanded in memory).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>

#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

namespace {

// Offset of row r's mask row: the mask is broadcast to `scores`'s leading dims through strides.
struct MaskRows {
  std::vector<int64_t> sizes, strides;  // leading dims of scores, and the expanded mask's strides
  int64_t last_stride;
  MaskRows(const at::Tensor& scores, const at::Tensor& expanded) {
    for (int64_t d = 0; d + 1 < scores.dim(); ++d) {
      sizes.push_back(scores.size(d));
      strides.push_back(expanded.stride(d));
    }
    last_stride = expanded.stride(-1);
  }
  int64_t offset(int64_t r) const {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      off += (r % sizes[d]) * strides[d];
      r /= sizes[d];
    }
    return off;
  }
};

}  // namespace

at::Tensor masked_softmax_forward(const at::Tensor& scores_in, const at::Tensor& mask, double scale) {
  auto scores = scores_in.contiguous();
  auto expanded = mask.to(scores.scalar_type()).expand_as(scores);
  MaskRows rows_of(scores, expanded);
  const int64_t cols = scores.size(-1), rows = scores.numel() / cols;
  auto y = at::empty_like(scores);
  AT_DISPATCH_FLOATING_TYPES(scores.scalar_type(), "masked_softmax_forward", [&] {
    const scalar_t* sp = scores.data_ptr<scalar_t>();
    const scalar_t* mp = expanded.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* s = sp + r * cols;
        const scalar_t* m = mp + rows_of.offset(r);
        scalar_t* out = yp + r * cols;
        scalar_t peak = -std::numeric_limits<scalar_t>::infinity();
        for (int64_t c = 0; c < cols; ++c) {
          out[c] = s[c] * scalar_t(scale) + m[c * rows_of.last_stride];
          peak = std::max(peak, out[c]);
        }
        if (peak == -std::numeric_limits<scalar_t>::infinity()) peak = 0;  // a fully masked row
        double sum = 0;
        for (int64_t c = 0; c < cols; ++c) {
          out[c] = std::exp(out[c] - peak);
          sum += out[c];
        }
        const scalar_t inv = sum > 0 ? scalar_t(1.0 / sum) : scalar_t(0);
        for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
      }
    });
  });
  return y;
}

// d scores = scale * y * (dy - sum(dy * y)) per row; the mask is a constant.
at::Tensor masked_softmax_backward(const at::Tensor& dy_in, const at::Tensor& y_in, double scale) {
  auto dy = dy_in.contiguous(), y = y_in.contiguous();
  const int64_t cols = y.size(-1), rows = y.numel() / cols;
  auto ds = at::empty_like(y);
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "masked_softmax_backward", [&] {
    const scalar_t* dyp = dy.data_ptr<scalar_t>();
    const scalar_t* yp = y.data_ptr<scalar_t>();
    scalar_t* dsp = ds.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        double dot = 0;
        for (int64_t c = 0; c < cols; ++c) dot += double(dyp[r * cols + c]) * double(yp[r * cols + c]);
        for (int64_t c = 0; c < cols; ++c)
          dsp[r * cols + c] = scalar_t(scale * double(yp[r * cols + c]) * (double(dyp[r * cols + c]) - dot));
      }
    });
  });
  return ds;
}

}  // namespace slapo::kernels::cpu
