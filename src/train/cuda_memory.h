// CUDA's caching allocator's own counts for a GPU: what tensors hold and what the allocator has
// reserved from the driver, now and at their peaks (PyTorch's torch.cuda.memory_allocated,
// memory_reserved, max_memory_allocated, max_memory_reserved).
#pragma once

#include <optional>

namespace slapo {

struct CudaMemory {
  double allocated_mib = 0, reserved_mib = 0, peak_allocated_mib = 0, peak_reserved_mib = 0;
};

/// The counts of GPU `device`; nullopt in a build of LibTorch without CUDA. `reset_peak` then
/// starts the peaks again from what is held now (a training step's own peaks).
std::optional<CudaMemory> cuda_memory(int device, bool reset_peak = false);

}  // namespace slapo
