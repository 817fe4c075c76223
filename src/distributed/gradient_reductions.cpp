// The reductions fully_shard's backward leaves in flight, and where they land.
#include "distributed/gradient_reductions.h"

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
// counts them in `landed`. A wait that raises leaves the rest in flight, for run_backward to drop.
template <typename Keep>
void land_where(InFlight& state, Keep keep, int64_t& landed) {
  std::vector<GradientReduction> all = std::move(state.reductions);
  state.reductions.clear();
  for (size_t i = 0; i < all.size(); ++i) {
    if (keep(all[i])) {
      state.reductions.push_back(std::move(all[i]));
      continue;
    }
    try {
      land(all[i]);
    } catch (...) {
      for (size_t j = i + 1; j < all.size(); ++j) state.reductions.push_back(std::move(all[j]));
      throw;
    }
    ++landed;
  }
}

// Waits for every reduction in flight and forgets them: a backward pass failed before its end.
void drop_all(InFlight& state) {
  for (auto& r : state.reductions) {
    try {
      r.wait();  // the collective must finish before its buffers go
    } catch (...) {  // the failure at hand is the one to report
    }
    ++state.counts.dropped;
  }
  state.reductions.clear();
  state.landing_queued = false;  // the failed pass's callback never runs
}

}  // namespace

at::Tensor slice_gradient(const at::Tensor& part, int64_t rows, int64_t divide_by) {
  if (divide_by > 1) return rows == part.size(0) ? part.div_(divide_by) : part.narrow(0, 0, rows).div(divide_by);
  // a view would keep the padding rows alive with the gradient; the part itself is a tensor of its own
  return rows == part.size(0) ? part : part.narrow(0, 0, rows).clone();
}

void land_other_units(const void* unit) {
  auto& state = in_flight();
  std::lock_guard<std::mutex> lock(state.mutex);
  land_where(state, [unit](const GradientReduction& other) { return other.unit == unit; },
             state.counts.beside_backward);
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
  {
    // a pass that failed outside run_backward left its reductions and its callback flag behind
    auto& state = in_flight();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (!state.reductions.empty() || state.landing_queued) drop_all(state);
  }
  try {
    backward();
  } catch (...) {
    auto& state = in_flight();
    std::lock_guard<std::mutex> lock(state.mutex);
    drop_all(state);
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
