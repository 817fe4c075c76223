// The caching allocator's device statistics (see cuda_memory.h).
#include "train/cuda_memory.h"

#ifdef SLAPO_WITH_TORCH_CUDA
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace slapo {

std::optional<CudaMemory> cuda_memory(int device, bool reset_peak) {
#ifdef SLAPO_WITH_TORCH_CUDA
  namespace allocator = c10::cuda::CUDACachingAllocator;
  // the allocator keeps its per-device counts from CUDA's lazy start on; an empty tensor starts it
  (void)at::empty({0}, at::TensorOptions().device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
  const auto stats = allocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  const size_t all = 0;  // StatType::AGGREGATE: every pool together
  constexpr double kMiB = 1024.0 * 1024.0;
  CudaMemory out;
  out.allocated_mib = static_cast<double>(stats.allocated_bytes[all].current) / kMiB;
  out.reserved_mib = static_cast<double>(stats.reserved_bytes[all].current) / kMiB;
  out.peak_allocated_mib = static_cast<double>(stats.allocated_bytes[all].peak) / kMiB;
  out.peak_reserved_mib = static_cast<double>(stats.reserved_bytes[all].peak) / kMiB;
  if (reset_peak) allocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  return out;
#else
  (void)device;
  (void)reset_peak;
  return std::nullopt;
#endif
}

}  // namespace slapo
