// peak_tensor_bytes: a MemoryReportingInfoBase installed as the profiler state, so the CPU and
// CUDA allocators report every allocation and free to it while the function runs.
#include "train/tensor_memory.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <atomic>

namespace slapo {

namespace {

// The totals' parameter type changed between LibTorch versions (int64_t in 1.x, size_t later):
// read it off the method itself.
template <typename Method>
struct TotalArg;
template <typename C, typename R, typename Ptr, typename Size, typename Total, typename Total2, typename Device>
struct TotalArg<R (C::*)(Ptr, Size, Total, Total2, Device)> {
  using type = Total;
};
using Total = TotalArg<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::type;

class PeakMeter : public c10::MemoryReportingInfoBase {
 public:
  void reportMemoryUsage(void*, int64_t alloc_size, Total, Total, c10::Device) override {
    int64_t now = current_ += alloc_size;  // frees report a negative size
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  bool memoryProfilingEnabled() const override { return true; }
  int64_t peak() const { return peak_.load(); }

 private:
  std::atomic<int64_t> current_{0}, peak_{0};
};

}  // namespace

int64_t peak_tensor_bytes(const std::function<void()>& fn) {
  auto meter = std::make_shared<PeakMeter>();
  {
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, meter);
    fn();
  }
  return meter->peak();
}

}  // namespace slapo
