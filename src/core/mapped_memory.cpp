// mapped_memory.h: mmap and munmap, reported to the memory profiler as the CPU allocator reports.
#include "core/mapped_memory.h"

#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <utility>

namespace slapo {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;

size_t round_up(size_t bytes, size_t unit) { return (bytes + unit - 1) / unit * unit; }

struct Mapping {
  void* data;
  size_t mapped, bytes;  // the mapping's length, and what was asked for
  bool reported;         // a meter listened when it was allocated (as c10's CPU allocator, which
                         // reports a free only of a block whose allocation it reported)
};

void unmap(void* context) {
  auto* mapping = static_cast<Mapping*>(context);
  if (mapping->reported && c10::memoryProfilingEnabled())
    c10::reportMemoryUsageToProfiler(mapping->data, -static_cast<int64_t>(mapping->bytes), 0, 0, c10::Device(c10::kCPU));
  ::munmap(mapping->data, mapping->mapped);
  delete mapping;
}

// `length` bytes (whole pages) starting on a huge page boundary; its whole huge pages advised as
// such, so the kernel can back them with 2 MiB pages (one fault each, not 512) where transparent
// huge pages are on or madvised. The tail past the last whole huge page keeps small pages: a huge
// one there would be resident beyond what was asked for.
void* map_huge_aligned(size_t length, size_t bytes) {
  const size_t spare = length + kHugePage;
  void* raw = ::mmap(nullptr, spare, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(uintptr_t(kHugePage) - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = aligned + length;
  if (start + spare > end) ::munmap(reinterpret_cast<void*>(end), start + spare - end);
  void* data = reinterpret_cast<void*>(aligned);
  ::madvise(data, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // a hint: refused, small pages serve
  return data;
}

}  // namespace

c10::DataPtr mapped_allocation(size_t bytes) {
  if (bytes == 0) return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
  if (bytes > std::numeric_limits<size_t>::max() / 2) throw std::bad_alloc();
  const size_t length = round_up(bytes, static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  void* data = bytes >= kHugePage ? map_huge_aligned(length, bytes)
                                  : ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!data || data == MAP_FAILED) throw std::bad_alloc();
  const bool reported = c10::memoryProfilingEnabled();
  if (reported) c10::reportMemoryUsageToProfiler(data, static_cast<int64_t>(bytes), 0, 0, c10::Device(c10::kCPU));
  return c10::DataPtr(data, new Mapping{data, length, bytes, reported}, &unmap, c10::Device(c10::kCPU));
}

at::Tensor cpu_tensor_over(c10::DataPtr data, size_t bytes, at::IntArrayRef sizes, const at::TensorOptions& options) {
  c10::Allocator* allocator = c10::GetCPUAllocator();  // for a resize, which a fixed-size storage refuses
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(data), allocator, /*resizable=*/false);
  return at::empty({0}, options).set_(storage, 0, sizes);
}

at::Tensor empty_mapped(at::IntArrayRef sizes, const at::TensorOptions& options) {
  // at::empty refuses negative sizes and says so; an element count past memory falls to it too
  const bool countable = std::all_of(sizes.begin(), sizes.end(), [](int64_t s) { return s >= 0; });
  const int64_t elements = countable ? c10::multiply_integers(sizes) : 0;
  const size_t itemsize = options.dtype().itemsize();
  if (!options.device().is_cpu() || !countable || elements > std::numeric_limits<int64_t>::max() / int64_t(itemsize) ||
      static_cast<size_t>(elements) * itemsize < kMappedBytes)
    return at::empty(sizes, options);
  const size_t bytes = static_cast<size_t>(elements) * itemsize;
  return cpu_tensor_over(mapped_allocation(bytes), bytes, sizes, options);
}

}  // namespace slapo
