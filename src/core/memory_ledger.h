// Tensor memory that parts of the program hold now, by what it is for, so a peak meter
// (train/tensor_memory.h) can say what its peak was made of: the whole parameters fully_shard
// gathered, the gradients its reduce-scatters hold. Counted on the CPU (a CUDA allocation keeps
// its caching allocator's own pointer, which stream bookkeeping relies on, and is not counted).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace slapo {

enum class Held { Gathered, Reducing };

/// The bytes counted under `what` now.
int64_t held_bytes(Held what);

/// Counts `bytes` under `what` for its lifetime.
class HeldBytes {
 public:
  HeldBytes(Held what, int64_t bytes);
  ~HeldBytes();
  HeldBytes(const HeldBytes&) = delete;
  HeldBytes& operator=(const HeldBytes&) = delete;

 private:
  Held what_;
  int64_t bytes_;
};

/// `bytes` on `device`, counted under `what` until the memory is freed (CPU memory, from
/// `allocator` or mapped on its own from kMappedBytes, core/mapped_memory.h; other devices' comes back uncounted).
c10::DataPtr counted_allocation(c10::Allocator* allocator, c10::Device device, size_t bytes, Held what);

/// An uninitialised contiguous tensor whose memory is counted under `what` until freed.
at::Tensor empty_counted(at::IntArrayRef sizes, const at::TensorOptions& options, Held what);

}  // namespace slapo
