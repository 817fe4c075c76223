// Helpers shared by the CUDA kernels: grid sizes and a block-wide sum.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace slapo::cuda {

constexpr int kRowThreads = 256;  // threads per row-wise block

inline unsigned grid_for(int64_t n, unsigned block) {
  int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

inline int launch_status() { return static_cast<int>(cudaGetLastError()); }

/// Sum of `v` over the block (blockDim.x == kRowThreads); every thread gets the result.
__device__ inline float block_sum(float v) {
  __shared__ float partial[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kRowThreads / 32; ++w) total += partial[w];
  return total;
}

/// Max of `v` over the block, as block_sum.
__device__ inline float block_max(float v) {
  __shared__ float partial[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float m = partial[0];
  for (int w = 1; w < kRowThreads / 32; ++w) m = fmaxf(m, partial[w]);
  return m;
}

/// Column sums of a [rows, cols] matrix: out[c] = sum over r of m[r * cols + c].
__global__ void column_sum_kernel(const float* m, float* out, int64_t rows, int64_t cols);

}  // namespace slapo::cuda
