// The masked softmax and memory-efficient (FlashAttention-style) attention on CUDA. Attention:
// one thread per query row streams the keys and values through shared-memory tiles with an
// online softmax, so no S x S matrix exists; backward recomputes probabilities from the saved
// log-sum-exp and accumulates dk, dv with atomics.
#include <cfloat>

#include "cuda/common.cuh"
#include "cuda/launchers.h"

namespace slapo::cuda {

namespace {

constexpr int kTile = 32;     // keys per shared-memory tile, and query rows per block
constexpr int kMaxDim = 128;  // head size held in registers per thread

// scores [rows, cols] (row r = the leading dims flattened); the mask is read at
// mask[sum_d idx_d * mask_strides[d] + c * mask_col_stride] (stride 0 broadcasts).
__global__ void masked_softmax_forward_kernel(const float* scores, const float* mask, MaskLayout layout, float* y,
                                              int64_t cols, float scale) {
  const int64_t row = blockIdx.x;
  int64_t rest = row, moff = 0;
  for (int d = layout.dims - 1; d >= 0; --d) {
    moff += (rest % layout.sizes[d]) * layout.strides[d];
    rest /= layout.sizes[d];
  }
  const float* s = scores + row * cols;
  float* out = y + row * cols;
  float peak = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[c] = s[c] * scale + mask[moff + c * layout.col_stride];
    peak = fmaxf(peak, out[c]);
  }
  peak = block_max(peak);
  float sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[c] = expf(out[c] - peak);
    sum += out[c];
  }
  const float inv = 1.f / block_sum(sum);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] *= inv;
}

__global__ void masked_softmax_backward_kernel(const float* dy, const float* y, float* ds, int64_t cols, float scale) {
  const int64_t o = int64_t(blockIdx.x) * cols;
  float dot = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += dy[o + c] * y[o + c];
  dot = block_sum(dot);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) ds[o + c] = scale * y[o + c] * (dy[o + c] - dot);
}

__device__ int64_t visible_keys(int64_t i, int64_t sq, int64_t sk, bool causal) {
  return causal ? min(sk, i + (sk - sq) + 1) : sk;
}

// grid (B*H, ceil(Sq / kTile)), kTile threads: thread t owns query row blockIdx.y * kTile + t.
__global__ void attention_forward_kernel(const float* q, const float* k, const float* v, float* out, float* lse,
                                         int64_t sq, int64_t sk, int64_t d, float scale, bool causal) {
  __shared__ float ks[kTile][kMaxDim], vs[kTile][kMaxDim];
  const int64_t bh = blockIdx.x, i = int64_t(blockIdx.y) * kTile + threadIdx.x;
  const bool active = i < sq;
  const float* qrow = q + (bh * sq + (active ? i : 0)) * d;
  float acc[kMaxDim];
  for (int64_t c = 0; c < d; ++c) acc[c] = 0;
  float running_max = -FLT_MAX, running_sum = 0;
  const int64_t last = active ? visible_keys(i, sq, sk, causal) : 0;
  for (int64_t start = 0; start < sk; start += kTile) {
    __syncthreads();
    for (int64_t j = threadIdx.x; j < kTile && start + j < sk; j += blockDim.x)
      for (int64_t c = 0; c < d; ++c) {
        ks[j][c] = k[(bh * sk + start + j) * d + c];
        vs[j][c] = v[(bh * sk + start + j) * d + c];
      }
    __syncthreads();
    for (int64_t j = 0; j < kTile && start + j < last; ++j) {
      float s = 0;
      for (int64_t c = 0; c < d; ++c) s += qrow[c] * ks[j][c];
      s *= scale;
      const float new_max = fmaxf(running_max, s);
      const float correction = expf(running_max - new_max), p = expf(s - new_max);
      running_sum = running_sum * correction + p;
      for (int64_t c = 0; c < d; ++c) acc[c] = acc[c] * correction + p * vs[j][c];
      running_max = new_max;
    }
  }
  if (!active) return;
  for (int64_t c = 0; c < d; ++c) out[(bh * sq + i) * d + c] = acc[c] / running_sum;
  lse[bh * sq + i] = running_max + logf(running_sum);
}

// One thread per query row: p = exp(s - lse), dp = do . v, ds = p * (dp - sum(do * o)),
// dq += ds * k * scale, dk += ds * q * scale (atomic), dv += p * do (atomic).
__global__ void attention_backward_kernel(const float* dout, const float* q, const float* k, const float* v,
                                          const float* out, const float* lse, float* dq, float* dk, float* dv,
                                          int64_t sq, int64_t sk, int64_t d, float scale, bool causal) {
  const int64_t bh = blockIdx.x, i = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (i >= sq) return;
  const int64_t row = bh * sq + i;
  const float* qrow = q + row * d;
  const float* dorow = dout + row * d;
  float delta = 0;
  for (int64_t c = 0; c < d; ++c) delta += dorow[c] * out[row * d + c];
  for (int64_t j = 0; j < visible_keys(i, sq, sk, causal); ++j) {
    const float* krow = k + (bh * sk + j) * d;
    const float* vrow = v + (bh * sk + j) * d;
    float s = 0, dp = 0;
    for (int64_t c = 0; c < d; ++c) {
      s += qrow[c] * krow[c];
      dp += dorow[c] * vrow[c];
    }
    const float p = expf(s * scale - lse[row]);
    const float ds = p * (dp - delta) * scale;
    for (int64_t c = 0; c < d; ++c) {
      dq[row * d + c] += ds * krow[c];
      atomicAdd(dk + (bh * sk + j) * d + c, ds * qrow[c]);
      atomicAdd(dv + (bh * sk + j) * d + c, p * dorow[c]);
    }
  }
}

}  // namespace

int masked_softmax_forward(const float* scores, const float* mask, const MaskLayout& layout, float* y, int64_t rows,
                           int64_t cols, float scale, void* stream) {
  masked_softmax_forward_kernel<<<unsigned(rows), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      scores, mask, layout, y, cols, scale);
  return launch_status();
}

int masked_softmax_backward(const float* dy, const float* y, float* dscores, int64_t rows, int64_t cols, float scale,
                            void* stream) {
  masked_softmax_backward_kernel<<<unsigned(rows), kRowThreads, 0, static_cast<cudaStream_t>(stream)>>>(dy, y, dscores,
                                                                                                       cols, scale);
  return launch_status();
}

int attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int64_t batch_heads,
                      int64_t sq, int64_t sk, int64_t dim, bool causal, void* stream) {
  if (dim > kMaxDim) return static_cast<int>(cudaErrorInvalidValue);
  dim3 grid(unsigned(batch_heads), unsigned((sq + kTile - 1) / kTile));
  attention_forward_kernel<<<grid, kTile, 0, static_cast<cudaStream_t>(stream)>>>(q, k, v, out, lse, sq, sk, dim,
                                                                                  rsqrtf(float(dim)), causal);
  return launch_status();
}

int attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                       const float* lse, float* dq, float* dk, float* dv, int64_t batch_heads, int64_t sq, int64_t sk,
                       int64_t dim, bool causal, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  cudaMemsetAsync(dq, 0, sizeof(float) * batch_heads * sq * dim, s);
  cudaMemsetAsync(dk, 0, sizeof(float) * batch_heads * sk * dim, s);
  cudaMemsetAsync(dv, 0, sizeof(float) * batch_heads * sk * dim, s);
  dim3 grid(unsigned(batch_heads), unsigned((sq + kTile - 1) / kTile));
  attention_backward_kernel<<<grid, kTile, 0, s>>>(dout, q, k, v, out, lse, dq, dk, dv, sq, sk, dim,
                                                   1.f / sqrtf(float(dim)), causal);
  return launch_status();
}

}  // namespace slapo::cuda
