// ZeRO-1 AdamW over a flat view of the parameters.
#include "dist/zero.h"

#include <cmath>
#include <map>

#include "core/error.h"
#include "dist/group.h"
#include "train/adamw_update.h"

namespace slapo::dist {

ZeroAdamW::ZeroAdamW(std::vector<at::Tensor> params, std::shared_ptr<Group> group, ZeroOptions options)
    : params_(std::move(params)), group_(std::move(group)), options_(options) {
  if (params_.empty()) throw Error("optim.zero_adamw: no parameters to optimize");
  for (auto& p : params_) total_ += p.numel();
  int parts = group_->size();
  padded_ = (total_ + parts - 1) / parts * parts;  // every rank owns an equal slice
  shard_numel_ = padded_ / parts;
  exp_avg_ = torch::zeros({shard_numel_}, params_[0].options().requires_grad(false));
  exp_avg_sq_ = torch::zeros({shard_numel_}, params_[0].options().requires_grad(false));
}

std::vector<std::pair<std::string, at::Tensor>> ZeroAdamW::state_tensors() const {
  return {{"zero.exp_avg", exp_avg_},
          {"zero.exp_avg_sq", exp_avg_sq_},
          {"zero.step", torch::tensor({step_}, torch::kInt64)},
          {"zero.total_numel", torch::tensor({total_}, torch::kInt64)}};
}

void ZeroAdamW::load_state_tensors(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  for (auto* name : {"zero.exp_avg", "zero.exp_avg_sq", "zero.step", "zero.total_numel"})
    if (!by_name.count(name))
      throw Error(fmt::format("zero_adamw: the optimizer state has no '{}' (was it written by zero_adamw?)", name));
  int64_t total = by_name["zero.total_numel"].item<int64_t>();
  if (total != total_ || by_name["zero.exp_avg"].numel() != shard_numel_ || by_name["zero.exp_avg_sq"].numel() != shard_numel_)
    throw Error(fmt::format("zero_adamw: the saved state covers {} parameters in slices of {}, this optimizer {} in "
                            "slices of {} (another model or another data-parallel group size)",
                            total, by_name["zero.exp_avg"].numel(), total_, shard_numel_));
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(by_name["zero.exp_avg"].reshape({-1}));
  exp_avg_sq_.copy_(by_name["zero.exp_avg_sq"].reshape({-1}));
  step_ = by_name["zero.step"].item<int64_t>();
}

void ZeroAdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = at::Tensor();
}

void ZeroAdamW::step() {
  torch::NoGradGuard no_grad;
  ++step_;
  std::vector<at::Tensor> grads, values;
  for (auto& p : params_) {
    grads.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
    values.push_back(p.detach().reshape({-1}));
  }
  auto pad = [&](at::Tensor flat) { return at::constant_pad_nd(flat, {0, padded_ - total_}); };
  // 1. this rank's slice of the gradient averaged over the group (reduce-scatter)
  at::Tensor grad = group_->reduce_scatter(pad(at::cat(grads)), 0, "zero_adamw") / group_->size();
  at::Tensor param = group_->local_slice(pad(at::cat(values)), 0, "zero_adamw").clone();
  // 2. torch::optim::AdamW's update on the slice, fused (train/adamw_update.h)
  AdamWHyper h{options_.lr, options_.beta1, options_.beta2, options_.eps, options_.weight_decay, step_};
  adamw_update({param}, {grad.contiguous()}, {exp_avg_}, {exp_avg_sq_}, h);
  // 3. every rank gets every slice back (all-gather) and writes it into the parameters
  at::Tensor full = group_->all_gather(param, 0, "zero_adamw");
  int64_t offset = 0;
  for (auto& p : params_) {
    p.detach().copy_(full.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

}  // namespace slapo::dist
