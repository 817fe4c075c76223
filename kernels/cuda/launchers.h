// Raw-pointer launchers of the CUDA kernels. They know no LibTorch, so they compile with nvcc
// against any torch build; kernels.h wraps them for tensors where a CUDA libtorch is present.
#pragma once

#include <cstdint>

namespace slapo::cuda {

/// y = gelu(x + bias) over a [rows, cols] row-major matrix; `tanh_approx` picks GELU's tanh form.
/// Returns the CUDA error code of the launch (0 = success).
int bias_gelu_forward(const float* x, const float* bias, float* y, int64_t rows, int64_t cols, bool tanh_approx,
                      void* stream);

/// dx = dy * gelu'(x + bias) (dbias is the column sum of dx, reduced by the caller).
int bias_gelu_backward(const float* dy, const float* x, const float* bias, float* dx, int64_t rows, int64_t cols,
                       bool tanh_approx, void* stream);

/// Number of visible CUDA devices, or -1 with `error` set when the driver is missing.
int device_count(const char** error);

}  // namespace slapo::cuda
