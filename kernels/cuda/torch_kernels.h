// The CUDA kernels on LibTorch tensors: the same calls as kernels/cpu/cpu_kernels.h, for float32
// CUDA tensors, on the current CUDA stream. Built only against a CUDA LibTorch (SLAPO_CUDA_OPS).
#pragma once

#include <torch/torch.h>

#include <tuple>
#include <vector>

namespace slapo::kernels::cuda_tensors {

#include "kernel_signatures.inc"

}  // namespace slapo::kernels::cuda_tensors
