// Capturing and restoring generator states.
#include "primitives/rng.h"

#include <ATen/CPUGeneratorImpl.h>
#include <mutex>

#ifdef SLAPO_WITH_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

namespace slapo {

at::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

RngSnapshot RngSnapshot::capture(Module& root) {
  RngSnapshot s;
  s.cpu_ = cpu_rng_state();
#ifdef SLAPO_WITH_TORCH_CUDA
  for (int d = 0; d < static_cast<int>(at::cuda::device_count()); ++d) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(d);
    std::lock_guard<std::mutex> lock(gen.mutex());
    s.cuda_.push_back(gen.get_state());
  }
#endif
  std::function<void(Module&)> visit = [&](Module& m) {
    if (m.meta().rng_state) s.forked_.emplace_back(m.meta().rng_state, m.meta().rng_state->clone());
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
  return s;
}

void RngSnapshot::restore() const {
  set_cpu_rng_state(cpu_);
#ifdef SLAPO_WITH_TORCH_CUDA
  for (size_t d = 0; d < cuda_.size(); ++d) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(static_cast<int>(d));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(cuda_[d]);
  }
#endif
  for (auto& [slot, state] : forked_) *slot = state.clone();
}

}  // namespace slapo
