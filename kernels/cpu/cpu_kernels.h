// The CPU implementations behind kernels.h: contiguous inputs, float or double, forward and
// backward each one pass over the data, parallel over rows with at::parallel_for.
#pragma once

#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <tuple>
#include <vector>

namespace slapo::kernels::cpu {

/// AdamW's hyperparameters for one update; `step` counts from 1.
struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
};

/// torch's AdamW update of one contiguous float or double CPU tensor, in one pass (adamw.cpp);
/// every tensor has param's dtype and size.
void adamw_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                const AdamWHyper& h);

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

// The kernels' signatures, shared with kernels/cuda/torch_kernels.h (same calls, CUDA tensors).
#include "kernel_signatures.inc"

}  // namespace slapo::kernels::cpu
