// The peak of tensor memory while a function runs, from the allocators' own reports (the hook
// LibTorch's profiler uses): what a fused kernel saves against the ops it replaces.
#pragma once

#include <cstdint>
#include <functional>

namespace slapo {

/// Runs `fn` and returns the most bytes its tensors (CPU and CUDA, allocated on this thread or
/// threads that inherit its state, as the autograd engine's) held at once above the start.
int64_t peak_tensor_bytes(const std::function<void()>& fn);

/// The peak (as peak_tensor_bytes) and what fn's tensors still hold when it returns: bytes
/// allocated while it ran and not freed (a forward pass's saved activations, say); and of the
/// peak, what the memory ledger (core/memory_ledger.h) counted as fully_shard's gathered whole
/// parameters and as gradients held by reduce-scatters (above what it counted at the start).
struct TensorBytes {
  int64_t peak = 0, held = 0;
  int64_t gathered_at_peak = 0, reducing_at_peak = 0;
};
TensorBytes tensor_bytes(const std::function<void()>& fn);

}  // namespace slapo
