// mapped_memory.h: mmap and munmap, with the profiler's reports the CPU allocator would send.
#include "core/mapped_memory.h"

#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace slapo {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

struct Mapping {
  void* data;
  size_t mapped, bytes;  // the mapping's length, and what was asked for (and reported)
};

void unmap(void* context) {
  auto* mapping = static_cast<Mapping*>(context);
  c10::reportMemoryUsageToProfiler(mapping->data, -static_cast<int64_t>(mapping->bytes), 0, 0, c10::Device(c10::kCPU));
  ::munmap(mapping->data, mapping->mapped);
  delete mapping;
}

// A mapping of `bytes` rounded up to whole huge pages and starting on one, so the kernel can back
// it with 2 MiB pages (one fault each, not 512) where transparent huge pages are on or madvised.
void* map_huge_aligned(size_t bytes) {
  const size_t spare = bytes + kHugePage;
  void* raw = ::mmap(nullptr, spare, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(uintptr_t(kHugePage) - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = aligned + bytes;
  if (start + spare > end) ::munmap(reinterpret_cast<void*>(end), start + spare - end);
  void* data = reinterpret_cast<void*>(aligned);
  ::madvise(data, bytes, MADV_HUGEPAGE);  // a hint: where the kernel refuses it, small pages serve
  return data;
}

}  // namespace

c10::DataPtr mapped_allocation(size_t bytes) {
  if (bytes == 0) return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
  const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* data = bytes >= kHugePage ? map_huge_aligned(mapped)
                                  : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!data || data == MAP_FAILED) throw std::bad_alloc();
  c10::reportMemoryUsageToProfiler(data, static_cast<int64_t>(bytes), 0, 0, c10::Device(c10::kCPU));
  return c10::DataPtr(data, new Mapping{data, bytes >= kHugePage ? mapped : bytes, bytes}, &unmap,
                      c10::Device(c10::kCPU));
}

at::Tensor empty_mapped(at::IntArrayRef sizes, const at::TensorOptions& options) {
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(sizes)) * options.dtype().itemsize();
  if (!options.device().is_cpu() || bytes < kMappedBytes) return at::empty(sizes, options);
  c10::Allocator* allocator = c10::GetCPUAllocator();  // for a resize, which a fixed-size storage refuses
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, mapped_allocation(bytes), allocator, /*resizable=*/false);
  return at::empty({0}, options).set_(storage, 0, sizes);
}

}  // namespace slapo
