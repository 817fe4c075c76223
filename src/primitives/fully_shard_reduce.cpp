// The reductions fully_shard's backward leaves in flight, and where they land.
#include "primitives/fully_shard_reduce.h"

#include <torch/csrc/autograd/engine.h>

#include <mutex>
#include <vector>

namespace slapo {

namespace {

struct InFlight {
  std::mutex mutex;
  std::vector<GradientReduction> reductions;
  bool landing_queued = false;  // the current backward pass lands what is left when it ends
  GradientReductionCounts counts;
};

InFlight& in_flight() {
  static InFlight state;
  return state;
}

// Waits for the reduction and adds its gradient to the slice's, as autograd accumulates one.
void land(GradientReduction& r) {
  at::Tensor mine = slice_gradient(r.wait(), r.rows, r.divide_by);
  torch::NoGradGuard no_grad;
  at::Tensor& grad = r.slice.mutable_grad();
  if (grad.defined())
    grad.add_(mine);
  else
    grad = mine;
}

// Lands the reductions `keep` says no to, in the order they started (every rank the same), and
// counts them in `landed`.
template <typename Keep>
void land_where(InFlight& state, Keep keep, int64_t& landed) {
  std::vector<GradientReduction> kept;
  for (auto& r : state.reductions)
    if (keep(r)) {
      kept.push_back(std::move(r));
    } else {
      land(r);
      ++landed;
    }
  state.reductions = std::move(kept);
}

}  // namespace

at::Tensor slice_gradient(const at::Tensor& part, int64_t rows, int64_t divide_by) {
  at::Tensor mine = part.narrow(0, 0, rows);  // without the padding
  return divide_by > 1 ? mine.div(divide_by) : mine.clone();
}

void start_gradient_reduction(GradientReduction r) {
  auto& state = in_flight();
  std::lock_guard<std::mutex> lock(state.mutex);
  const void* unit = r.unit;
  // the previous unit's reductions ran while this unit's backward computed: they land now
  land_where(state, [unit](const GradientReduction& other) { return other.unit == unit; },
             state.counts.beside_backward);
  state.reductions.push_back(std::move(r));
  if (state.landing_queued) return;
  state.landing_queued = true;
  torch::autograd::Engine::get_default_engine().queue_callback([] {
    auto& state = in_flight();
    std::lock_guard<std::mutex> lock(state.mutex);
    state.landing_queued = false;
    land_where(state, [](const GradientReduction&) { return false; }, state.counts.at_end);
  });
}

void run_backward(const std::function<void()>& backward) {
  try {
    backward();
  } catch (...) {
    auto& state = in_flight();
    std::lock_guard<std::mutex> lock(state.mutex);
    for (auto& r : state.reductions) {
      try {
        r.wait();  // the collective must finish before its buffers go
      } catch (...) {  // the failure at hand is the one to report
      }
      ++state.counts.dropped;
    }
    state.reductions.clear();
    state.landing_queued = false;  // the failed pass's callback never runs
    throw;
  }
}

GradientReductionCounts gradient_reduction_counts() {
  auto& state = in_flight();
  std::lock_guard<std::mutex> lock(state.mutex);
  auto counts = state.counts;
  counts.in_flight = static_cast<int64_t>(state.reductions.size());
  return counts;
}

}  // namespace slapo
