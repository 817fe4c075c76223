// SwiGLU and RoPE on CUDA: elementwise, grid-stride loops.
#include "cuda/common.cuh"
#include "cuda/launchers.h"

namespace slapo::cuda {

namespace {

__device__ float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

__global__ void swiglu_forward_kernel(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

// d silu(g) = s + g * s * (1 - s) with s = sigmoid(g)
__global__ void swiglu_backward_kernel(const float* dy, const float* gate, const float* up, float* dgate, float* dup,
                                       int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float s = sigmoid(gate[i]);
    dgate[i] = dy[i] * up[i] * (s + gate[i] * s * (1.f - s));
    dup[i] = dy[i] * gate[i] * s;
  }
}

// x [B, H, S, D], cos/sin [B, S, D]; out = x*cos + rotate_half(x)*sin (sign -1: the inverse)
__global__ void rope_kernel(const float* x, const float* cos, const float* sin, float* y, int64_t B, int64_t H,
                            int64_t S, int64_t D, float sign) {
  const int64_t half = D / 2, n = B * H * S * half;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / half, d = i % half;
    const int64_t b = row / (H * S), s = row % S;
    const float* in = x + row * D;
    const float* c = cos + (b * S + s) * D;
    const float* sn = sin + (b * S + s) * D;
    y[row * D + d] = in[d] * c[d] - sign * in[d + half] * sn[d];
    y[row * D + d + half] = in[d + half] * c[d + half] + sign * in[d] * sn[d + half];
  }
}

}  // namespace

int swiglu_forward(const float* gate, const float* up, float* y, int64_t n, void* stream) {
  swiglu_forward_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(gate, up, y, n);
  return launch_status();
}

int swiglu_backward(const float* dy, const float* gate, const float* up, float* dgate, float* dup, int64_t n,
                    void* stream) {
  swiglu_backward_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(dy, gate, up, dgate, dup, n);
  return launch_status();
}

int rope(const float* x, const float* cos, const float* sin, float* y, int64_t batch, int64_t heads, int64_t seq,
         int64_t dim, bool inverse, void* stream) {
  const int64_t n = batch * heads * seq * (dim / 2);
  rope_kernel<<<grid_for(n, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(x, cos, sin, y, batch, heads, seq, dim,
                                                                               inverse ? -1.f : 1.f);
  return launch_status();
}

}  // namespace slapo::cuda
