// Optimizer state as named tensors, so training checkpoints are safetensors files:
// "<param>.exp_avg", "<param>.exp_avg_sq", "<param>.step" (AdamW), "<param>.momentum_buffer" (SGD).
#pragma once

#include "io/safetensors.h"

#include <type_traits>

namespace slapo {

/// How LibTorch keys an optimizer's per-parameter state: the TensorImpl's printed address in
/// 1.x, the pointer itself in 2.x.
using OptimizerStateKey =
    std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
OptimizerStateKey optimizer_state_key(const at::Tensor& p);

/// The state of `optimizer` for each named parameter that has one.
NamedTensors optimizer_state_tensors(torch::optim::Optimizer& optimizer, const NamedTensors& params);

/// Restores what optimizer_state_tensors wrote; names absent from `state` keep no state.
void load_optimizer_state_tensors(torch::optim::Optimizer& optimizer, const NamedTensors& params,
                                  const NamedTensors& state);

}  // namespace slapo
