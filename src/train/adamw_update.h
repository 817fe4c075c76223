// AdamW's update over many tensors at once, the fastest way each device offers, with
// torch::optim::AdamW's arithmetic: ATen's fused kernel on CUDA with LibTorch 2.x, one pass per
// tensor on CPU (kernels/cpu/adamw.cpp), ATen's multi-tensor _foreach_ ops elsewhere.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "cpu/cpu_kernels.h"

namespace slapo {

using kernels::cpu::AdamWHyper;

enum class AdamWImpl {
  Auto,     // fused where it exists, else foreach
  Fused,    // one kernel per device (CPU float/double; CUDA with LibTorch 2.x)
  Foreach,  // ATen's _foreach_ ops: a handful of multi-tensor launches
  Loop,     // torch::optim::AdamW's own step, parameter by parameter (the reference)
};

/// "auto" | "fused" | "foreach" | "loop"; errors name `fn` and the valid choices.
AdamWImpl adamw_impl_from_name(const std::string& name, const char* fn);

/// One AdamW step of tensors that share a step count (h.step, counted from 1). The four lists
/// are parallel; params and moments are updated in place. `impl` is Auto, Fused or Foreach.
void adamw_update(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                  const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                  const AdamWHyper& h, AdamWImpl impl = AdamWImpl::Auto);

/// torch::optim::AdamW whose step() runs adamw_update over each group's parameters; its state
/// (AdamWParamState per parameter) is torch's, so checkpoints read and write it unchanged.
class MultiTensorAdamW : public torch::optim::AdamW {
 public:
  MultiTensorAdamW(std::vector<at::Tensor> params, torch::optim::AdamWOptions options, AdamWImpl impl)
      : torch::optim::AdamW(std::move(params), std::move(options)), impl_(impl) {}
  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  AdamWImpl impl_;
};

}  // namespace slapo
