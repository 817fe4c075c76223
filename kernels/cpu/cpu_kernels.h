// The CPU implementations behind kernels.h: contiguous inputs, float or double, forward and
// backward each one pass over the data, parallel over rows with at::parallel_for.
#pragma once

#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <tuple>

namespace slapo::kernels::cpu {

/// Backward kernels that also reduce over rows (dbias, dweight): runs row_fn(r, acc) for every
/// row in parallel chunks, each chunk with its own accumulator row of `cols` values, and returns
/// the column-wise sum of the accumulators (no atomics, deterministic for a thread count).
template <typename scalar_t, typename RowFn>
at::Tensor rows_with_column_sum(int64_t rows, int64_t cols, const at::TensorOptions& opts, RowFn row_fn) {
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), rows));
  auto partial = at::zeros({chunks, cols}, opts);
  scalar_t* pp = partial.template data_ptr<scalar_t>();
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k)
      for (int64_t r = k * per_chunk; r < std::min(rows, (k + 1) * per_chunk); ++r) row_fn(r, pp + k * cols);
  });
  return partial.sum(0);
}

at::Tensor bias_gelu_forward(const at::Tensor& x, const at::Tensor& bias, bool tanh_approx);
/// Returns (dx, dbias).
std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& bias,
                                                      bool tanh_approx);

/// Returns (y, inverse rms per row).
std::tuple<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& x, const at::Tensor& weight, double eps);
/// Returns (dx, dweight).
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight,
                                                     const at::Tensor& inv_rms);

at::Tensor swiglu_forward(const at::Tensor& gate, const at::Tensor& up);
/// Returns (dgate, dup).
std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& dy, const at::Tensor& gate, const at::Tensor& up);

/// `inverse` rotates by -theta (the backward of the rotation).
at::Tensor rope_apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool inverse);

/// Memory-efficient attention: returns (out, log-sum-exp per query row).
std::tuple<at::Tensor, at::Tensor> attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     bool causal);
/// Returns (dq, dk, dv), recomputing probabilities from the log-sum-exp.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(const at::Tensor& dout, const at::Tensor& q,
                                                                  const at::Tensor& k, const at::Tensor& v,
                                                                  const at::Tensor& out, const at::Tensor& lse,
                                                                  bool causal);

/// softmax(scores * scale + mask) over the last dim; the additive mask broadcasts to scores.
at::Tensor masked_softmax_forward(const at::Tensor& scores, const at::Tensor& mask, double scale);
at::Tensor masked_softmax_backward(const at::Tensor& dy, const at::Tensor& y, double scale);

/// LayerNorm(dropout(x + bias) + residual) with the dropout's keep mask given (undefined: no
/// dropout) and kept values scaled by keep_scale. Returns (y, normalised rows, 1/std per row).
std::tuple<at::Tensor, at::Tensor, at::Tensor> bias_dropout_add_layer_norm_forward(
    const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual, const at::Tensor& weight,
    const at::Tensor& ln_bias, const at::Tensor& keep, double keep_scale, double eps);
/// Returns (dx, dbias, dresidual, dweight, dln_bias).
std::vector<at::Tensor> bias_dropout_add_layer_norm_backward(const at::Tensor& dy, const at::Tensor& normed,
                                                             const at::Tensor& rstd, const at::Tensor& weight,
                                                             const at::Tensor& keep, double keep_scale);

}  // namespace slapo::kernels::cpu
