// Capturing and restoring generator states.
#include "primitives/rng.h"

#include <ATen/CPUGeneratorImpl.h>
#include <mutex>

#include "core/error.h"

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

std::vector<at::Tensor> cuda_rng_states() {
  std::vector<at::Tensor> states;
#ifdef SLAPO_WITH_TORCH_CUDA
  for (int d = 0; d < static_cast<int>(at::cuda::device_count()); ++d) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(d);
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.push_back(gen.get_state());
  }
#endif
  return states;
}

void set_cuda_rng_states(const std::vector<at::Tensor>& states) {
  size_t devices = 0;
#ifdef SLAPO_WITH_TORCH_CUDA
  devices = static_cast<size_t>(at::cuda::device_count());
#endif
  if (states.size() > devices)
    throw Error(fmt::format("set_cuda_rng_states: {} CUDA generator states, but this process has {} CUDA device{}",
                            states.size(), devices, devices == 1 ? "" : "s"));
#ifdef SLAPO_WITH_TORCH_CUDA
  for (size_t d = 0; d < states.size(); ++d) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(static_cast<int>(d));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(states[d]);
  }
#endif
}

NamedStreams& named_streams() {
  static NamedStreams streams;
  return streams;
}

RngSnapshot RngSnapshot::capture(Module& root) {
  RngSnapshot s;
  s.cpu_ = cpu_rng_state();
  s.cuda_ = cuda_rng_states();
  s.streams_ = named_streams();  // the states are replaced, never changed in place: sharing them is a copy
  std::function<void(Module&)> visit = [&](Module& m) {
    if (m.meta().rng_state) s.forked_.emplace_back(m.meta().rng_state, m.meta().rng_state->clone());
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
  return s;
}

void RngSnapshot::restore() const {
  set_cpu_rng_state(cpu_);
  set_cuda_rng_states(cuda_);
  named_streams() = streams_;
  for (auto& [slot, state] : forked_) *slot = state.clone();
}

}  // namespace slapo
