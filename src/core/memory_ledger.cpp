// The counts behind memory_ledger.h: one atomic a kind, moved by allocations that carry their
// count to the moment the memory is freed.
#include "core/memory_ledger.h"

#include <c10/core/CPUAllocator.h>

#include "core/mapped_memory.h"

#include <atomic>

namespace slapo {

namespace {

std::atomic<int64_t>& count(Held what) {
  static std::atomic<int64_t> counts[2];
  return counts[static_cast<int>(what)];
}

// The allocator's own pointer, and what to uncount when it goes.
struct Counted {
  c10::DataPtr inner;
  int64_t bytes;
  Held what;
};

void free_counted(void* context) {
  auto* counted = static_cast<Counted*>(context);
  count(counted->what) -= counted->bytes;
  delete counted;  // frees the memory through the allocator's own deleter
}

}  // namespace

int64_t held_bytes(Held what) { return count(what).load(); }

HeldBytes::HeldBytes(Held what, int64_t bytes) : what_(what), bytes_(bytes) { count(what_) += bytes_; }
HeldBytes::~HeldBytes() { count(what_) -= bytes_; }

c10::DataPtr counted_allocation(c10::Allocator* allocator, c10::Device device, size_t bytes, Held what) {
  if (!device.is_cpu()) return allocator->allocate(bytes);
  c10::DataPtr inner = bytes >= kMappedBytes ? mapped_allocation(bytes) : allocator->allocate(bytes);
  if (!inner.get()) return inner;
  void* data = inner.get();
  count(what) += static_cast<int64_t>(bytes);
  auto* context = new Counted{std::move(inner), static_cast<int64_t>(bytes), what};
  return c10::DataPtr(data, context, &free_counted, device);
}

at::Tensor empty_counted(at::IntArrayRef sizes, const at::TensorOptions& options, Held what) {
  if (options.device().type() != c10::DeviceType::CPU) return at::empty(sizes, options);
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(sizes)) * options.dtype().itemsize();
  return cpu_tensor_over(counted_allocation(c10::GetCPUAllocator(), options.device(), bytes, what), bytes, sizes,
                         options);
}

}  // namespace slapo
