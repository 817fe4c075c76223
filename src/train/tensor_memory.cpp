// peak_tensor_bytes: a MemoryReportingInfoBase installed as the profiler state, so the CPU and
// CUDA allocators report every allocation and free to it while the function runs.
#include "train/tensor_memory.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>

namespace slapo {

namespace {

// reportMemoryUsage's parameters after (ptr, alloc_size) differ between LibTorch versions
// ((device) in some, (total_allocated, total_reserved, device) as int64_t or size_t in others):
// the meter takes them off the method itself.
template <typename Method>
class MeterFor;
template <typename C, typename R, typename... Rest>
class MeterFor<R (C::*)(void*, int64_t, Rest...)> : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t alloc_size, Rest...) override {
    int64_t now = current_ += alloc_size;  // frees report a negative size
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  bool memoryProfilingEnabled() const override { return true; }
  int64_t peak() const { return peak_.load(); }
  int64_t current() const { return current_.load(); }

 private:
  std::atomic<int64_t> current_{0}, peak_{0};
};
using PeakMeter = MeterFor<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>;

}  // namespace

TensorBytes tensor_bytes(const std::function<void()>& fn) {
  auto meter = std::make_shared<PeakMeter>();
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, meter);
    fn();
  }
  return {meter->peak(), meter->current()};
}

int64_t peak_tensor_bytes(const std::function<void()>& fn) { return tensor_bytes(fn).peak; }

}  // namespace slapo
