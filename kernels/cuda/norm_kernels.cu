// RMSNorm and the LayerNorm tail (bias + dropout + residual + LayerNorm) on CUDA: one block per
// row, block-wide sums for the statistics; the weight gradients reduce per-row products by column.
#include "cuda/common.cuh"
#include "cuda/launchers.h"

namespace slapo::cuda {

__global__ void column_sum_kernel(const float* m, float* out, int64_t rows, int64_t cols) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x) {
    float s = 0;
    for (int64_t r = 0; r < rows; ++r) s += m[r * cols + c];
    out[c] = s;
  }
}

namespace {

__global__ void rms_norm_forward_kernel(const float* x, const float* w, float* y, float* inv_rms, int64_t cols,
                                        float eps) {
  const int64_t row = blockIdx.x;
  const float* in = x + row * cols;
  float sq = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sq += in[c] * in[c];
  const float inv = rsqrtf(block_sum(sq) / float(cols) + eps);
  if (threadIdx.x == 0) inv_rms[row] = inv;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[row * cols + c] = w[c] * in[c] * inv;
}

// dx = s * w * dy - x * s^3 * mean(w * dy * x); the per-row dy * x * s goes to `scratch` for dw.
__global__ void rms_norm_backward_kernel(const float* dy, const float* x, const float* w, const float* inv_rms,
                                         float* dx, float* scratch, int64_t cols) {
  const int64_t row = blockIdx.x, o = row * cols;
  const float s = inv_rms[row];
  float dot = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += w[c] * dy[o + c] * x[o + c];
  const float coef = s * s * s * block_sum(dot) / float(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dx[o + c] = s * w[c] * dy[o + c] - x[o + c] * coef;
    scratch[o + c] = dy[o + c] * x[o + c] * s;
  }
}

__global__ void layer_norm_tail_forward_kernel(const float* x, const float* bias, const float* residual,
                                               const float* keep, float keep_scale, const float* w, const float* lb,
                                               float* y, float* normed, float* rstd, int64_t cols, float eps) {
  const int64_t row = blockIdx.x, o = row * cols;
  float sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float h = x[o + c] + bias[c];
    if (keep) h *= keep[o + c] * keep_scale;
    h += residual[o + c];
    normed[o + c] = h;
    sum += h;
  }
  const float mean = block_sum(sum) / float(cols);
  float var = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) var += (normed[o + c] - mean) * (normed[o + c] - mean);
  const float inv = rsqrtf(block_sum(var) / float(cols) + eps);
  if (threadIdx.x == 0) rstd[row] = inv;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    normed[o + c] = (normed[o + c] - mean) * inv;
    y[o + c] = normed[o + c] * w[c] + lb[c];
  }
}

// dh = rstd * (g - mean(g) - n * mean(g * n)), g = dy * w; dx = dh * keep * keep_scale.
// Per-row contributions to dw (dy * n) go to `scratch_w`; dbias and dlb are column sums of dx, dy.
__global__ void layer_norm_tail_backward_kernel(const float* dy, const float* normed, const float* rstd,
                                                const float* w, const float* keep, float keep_scale, float* dx,
                                                float* dres, float* scratch_w, int64_t cols) {
  const int64_t row = blockIdx.x, o = row * cols;
  float sg = 0, sgn = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = dy[o + c] * w[c];
    sg += g;
    sgn += g * normed[o + c];
  }
  const float mean_g = block_sum(sg) / float(cols);
  const float mean_gn = block_sum(sgn) / float(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float dh = rstd[row] * (dy[o + c] * w[c] - mean_g - normed[o + c] * mean_gn);
    dres[o + c] = dh;
    dx[o + c] = keep ? dh * keep[o + c] * keep_scale : dh;
    scratch_w[o + c] = dy[o + c] * normed[o + c];
  }
}

}  // namespace

int rms_norm_forward(const float* x, const float* weight, float* y, float* inv_rms, int64_t rows, int64_t cols,
                     float eps, void* stream) {
  rms_norm_forward_kernel<<<unsigned(rows), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, weight, y, inv_rms,
                                                                                                cols, eps);
  return launch_status();
}

int rms_norm_backward(const float* dy, const float* x, const float* weight, const float* inv_rms, float* dx,
                      float* dweight, float* scratch, int64_t rows, int64_t cols, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  rms_norm_backward_kernel<<<unsigned(rows), kRowThreads, 0, s>>>(dy, x, weight, inv_rms, dx, scratch, cols);
  if (dweight) column_sum_kernel<<<grid_for(cols, 256), 256, 0, s>>>(scratch, dweight, rows, cols);
  return launch_status();
}

int layer_norm_tail_forward(const float* x, const float* bias, const float* residual, const float* keep,
                            float keep_scale, const float* weight, const float* ln_bias, float* y, float* normed,
                            float* rstd, int64_t rows, int64_t cols, float eps, void* stream) {
  layer_norm_tail_forward_kernel<<<unsigned(rows), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, bias, residual, keep, keep_scale, weight, ln_bias, y, normed, rstd, cols, eps);
  return launch_status();
}

int layer_norm_tail_backward(const float* dy, const float* normed, const float* rstd, const float* weight,
                             const float* keep, float keep_scale, float* dx, float* dbias, float* dresidual,
                             float* dweight, float* dln_bias, float* scratch, int64_t rows, int64_t cols,
                             void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  layer_norm_tail_backward_kernel<<<unsigned(rows), kRowThreads, 0, s>>>(dy, normed, rstd, weight, keep, keep_scale,
                                                                         dx, dresidual, scratch, cols);
  if (dweight) column_sum_kernel<<<grid_for(cols, 256), 256, 0, s>>>(scratch, dweight, rows, cols);
  if (dbias) column_sum_kernel<<<grid_for(cols, 256), 256, 0, s>>>(dx, dbias, rows, cols);
  if (dln_bias) column_sum_kernel<<<grid_for(cols, 256), 256, 0, s>>>(dy, dln_bias, rows, cols);
  return launch_status();
}

}  // namespace slapo::cuda
