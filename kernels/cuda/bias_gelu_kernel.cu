// Fused bias add + GELU (exact erf form and tanh approximation), forward and backward.
#include <cuda_runtime.h>

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

__global__ void forward_kernel(const float* x, const float* bias, float* y, int64_t n, int64_t cols, bool tanh_approx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = gelu(x[i] + bias[i % cols], tanh_approx);
}

__global__ void backward_kernel(const float* dy, const float* x, const float* bias, float* dx, int64_t n, int64_t cols,
                                bool tanh_approx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = dy[i] * gelu_grad(x[i] + bias[i % cols], tanh_approx);
}


}  // namespace

int bias_gelu_forward(const float* x, const float* bias, float* y, int64_t rows, int64_t cols, bool tanh_approx,
                      void* stream) {
  int64_t n = rows * cols;
  forward_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, bias, y, n, cols, tanh_approx);
  return launch_status();
}

int bias_gelu_backward(const float* dy, const float* x, const float* bias, float* dx, int64_t rows, int64_t cols,
                       bool tanh_approx, void* stream) {
  int64_t n = rows * cols;
  backward_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(dy, x, bias, dx, n, cols,
                                                                                   tanh_approx);
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
