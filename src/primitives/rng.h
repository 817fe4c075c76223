// Random-number state that checkpoint replays and fork_rng separates per rank.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/module.h"

namespace slapo {

/// slapo.random's named streams (the states its trackers fork to, Megatron's RNG tracker), by
/// "<tracker>/<stream>". They live here, not in Lua, so that checkpoint's recomputation replays
/// a stream drawn from inside a checkpointed module as it replays the default generator.
using NamedStreams = std::map<std::string, c10::IValue>;
NamedStreams& named_streams();

/// The default CPU (and CUDA, in CUDA builds) generator states, the named streams, and the
/// fork_rng states of a module tree, captured so a recomputation draws the same random numbers.
class RngSnapshot {
 public:
  static RngSnapshot capture(Module& root);
  void restore() const;

 private:
  at::Tensor cpu_;
  std::vector<at::Tensor> cuda_;
  NamedStreams streams_;
  std::vector<std::pair<std::shared_ptr<at::Tensor>, at::Tensor>> forked_;
};

at::Tensor cpu_rng_state();
void set_cpu_rng_state(const at::Tensor& state);
/// The default generator state of each CUDA device, in device order (none without CUDA).
std::vector<at::Tensor> cuda_rng_states();
/// Sets the first states.size() devices' generators; states for devices this process does not
/// have are an error, naming how many it has.
void set_cuda_rng_states(const std::vector<at::Tensor>& states);

}  // namespace slapo
