// peak_tensor_bytes: a MemoryReportingInfoBase installed as the profiler state, so the CPU and
// CUDA allocators report every allocation and free to it while the function runs.
#include "train/tensor_memory.h"

#include <c10/core/Allocator.h>
#include <c10/util/Logging.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#ifdef C10_USE_GLOG
#include <glog/logging.h>  // FLAGS_minloglevel: a glog build's threshold (Debian's LibTorch)
#endif

#include <algorithm>
#include <atomic>

#include "core/memory_ledger.h"

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
    while (now > peak) {
      if (!peak_.compare_exchange_weak(peak, now)) continue;
      // what the peak holds, as the ledger counts it (gathered_ and reducing_ are what they were
      // at the highest peak, give or take another thread's allocation at the same moment)
      gathered_ = held_bytes(Held::Gathered) - gathered_start_;
      reducing_ = held_bytes(Held::Reducing) - reducing_start_;
      break;
    }
  }
  bool memoryProfilingEnabled() const override { return true; }
  int64_t peak() const { return peak_.load(); }
  int64_t current() const { return current_.load(); }
  int64_t gathered_at_peak() const { return gathered_.load(); }
  int64_t reducing_at_peak() const { return reducing_.load(); }

 private:
  std::atomic<int64_t> current_{0}, peak_{0}, gathered_{0}, reducing_{0};
  const int64_t gathered_start_ = held_bytes(Held::Gathered), reducing_start_ = held_bytes(Held::Reducing);
};
using PeakMeter = MeterFor<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>;

// While a meter listens, the CPU allocator logs a warning for every 1,000th free of a block it
// saw allocated before ("Memory block of unknown size ..."): expected here, and noise to a user.
// Its log's threshold is raised to errors for the metered call (LibTorch's TORCH_WARN warnings
// take another path and still show).
class QuietAllocatorLog {
 public:
  QuietAllocatorLog() : saved_(threshold()) { threshold() = std::max(saved_, 2); }
  ~QuietAllocatorLog() { threshold() = saved_; }
  QuietAllocatorLog(const QuietAllocatorLog&) = delete;
  QuietAllocatorLog& operator=(const QuietAllocatorLog&) = delete;

 private:
  static int32_t& threshold() {
#ifdef C10_USE_GLOG
    return FLAGS_minloglevel;
#else
    return FLAGS_caffe2_log_level;
#endif
  }
  int32_t saved_;
};

}  // namespace

TensorBytes tensor_bytes(const std::function<void()>& fn) {
  auto meter = std::make_shared<PeakMeter>();
  {
    QuietAllocatorLog quiet;
    c10::DebugInfoGuard guard(c10::DebugInfoKind::PROFILER_STATE, meter);
    fn();
  }
  return {meter->peak(), meter->current(), meter->gathered_at_peak(), meter->reducing_at_peak()};
}

int64_t peak_tensor_bytes(const std::function<void()>& fn) { return tensor_bytes(fn).peak; }

}  // namespace slapo
