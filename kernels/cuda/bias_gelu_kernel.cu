// Fused bias add + GELU (exact erf form and tanh approximation), forward and backward.
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "cuda/common.cuh"
#include "cuda/launchers.h"

namespace slapo::cuda {

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;

__device__ float gelu(float v, bool tanh_approx) {
  if (tanh_approx) return 0.5f * v * (1.f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  return 0.5f * v * (1.f + erff(v * kInvSqrt2));
}

__device__ float gelu_grad(float v, bool tanh_approx) {
  if (tanh_approx) {
    float inner = kSqrt2OverPi * (v + 0.044715f * v * v * v);
    float t = tanhf(inner);
    return 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * 0.044715f * v * v);
  }
  float cdf = 0.5f * (1.f + erff(v * kInvSqrt2));
  float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
  return cdf + v * pdf;
}

// float and float4 alike: v[k] = f(v[k], b[k]), and the elementwise product
template <typename F>
__device__ void apply(float& v, float b, F f) { v = f(v, b); }
template <typename F>
__device__ void apply(float4& v, const float4& b, F f) {
  v.x = f(v.x, b.x), v.y = f(v.y, b.y), v.z = f(v.z, b.z), v.w = f(v.w, b.w);
}
__device__ float mul(float a, float b) { return a * b; }
__device__ float4 mul(const float4& a, const float4& b) { return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }

// Threads own columns, and walk rows: the bias is read once per thread and no element needs the
// 64-bit `i % cols` (an emulated division on the GPU). With cols % 4 == 0 every load is a float4.
template <typename Vec>
__global__ void forward_kernel(const Vec* x, const Vec* bias, Vec* y, int64_t rows, int64_t vec_cols,
                               bool tanh_approx) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= vec_cols) return;
  const Vec b = bias[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    Vec v = x[r * vec_cols + c];
    apply(v, b, [&](float in, float bi) { return gelu(in + bi, tanh_approx); });
    y[r * vec_cols + c] = v;
  }
}

template <typename Vec>
__global__ void backward_kernel(const Vec* dy, const Vec* x, const Vec* bias, Vec* dx, int64_t rows, int64_t vec_cols,
                                bool tanh_approx) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= vec_cols) return;
  const Vec b = bias[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t i = r * vec_cols + c;
    Vec g = x[i];
    apply(g, b, [&](float in, float bi) { return gelu_grad(in + bi, tanh_approx); });
    dx[i] = mul(dy[i], g);
  }
}

constexpr unsigned kColumnThreads = 128;

// grid: enough column blocks for the row, and row bands up to CUDA's 65535 limit on grid.y
dim3 grid_of(int64_t rows, int64_t vec_cols) {
  return dim3(grid_for(vec_cols, kColumnThreads), static_cast<unsigned>(rows < 8192 ? (rows > 0 ? rows : 1) : 8192));
}

bool vectorizable(int64_t cols, std::initializer_list<const void*> pointers) {
  if (cols % 4 != 0) return false;
  for (auto* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace

int bias_gelu_forward(const float* x, const float* bias, float* y, int64_t rows, int64_t cols, bool tanh_approx,
                      void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (vectorizable(cols, {x, bias, y})) {
    forward_kernel<<<grid_of(rows, cols / 4), kColumnThreads, 0, s>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(bias), reinterpret_cast<float4*>(y), rows,
        cols / 4, tanh_approx);
  } else {
    forward_kernel<<<grid_of(rows, cols), kColumnThreads, 0, s>>>(x, bias, y, rows, cols, tanh_approx);
  }
  return launch_status();
}

int bias_gelu_backward(const float* dy, const float* x, const float* bias, float* dx, int64_t rows, int64_t cols,
                       bool tanh_approx, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (vectorizable(cols, {dy, x, bias, dx})) {
    backward_kernel<<<grid_of(rows, cols / 4), kColumnThreads, 0, s>>>(
        reinterpret_cast<const float4*>(dy), reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(bias),
        reinterpret_cast<float4*>(dx), rows, cols / 4, tanh_approx);
  } else {
    backward_kernel<<<grid_of(rows, cols), kColumnThreads, 0, s>>>(dy, x, bias, dx, rows, cols, tanh_approx);
  }
  return launch_status();
}

int device_count(const char** error) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    if (error) *error = cudaGetErrorString(rc);
    return -1;
  }
  return count;
}

}  // namespace slapo::cuda
