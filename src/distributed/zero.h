// ZeRO stage 1: AdamW whose moments are sharded across a data-parallel group. Each step
// reduce-scatters the flattened gradients (averaged over the group), updates this rank's slice
// with exactly torch::optim::AdamW's arithmetic, and all-gathers the parameters.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

namespace slapo::dist {

class Group;

struct ZeroOptions {
  double lr = 1e-3, weight_decay = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// Average the gradients over the group (the default), or sum them where each rank's are its part
  /// of the batch's (pipeline stages on meshes of their own).
  bool average = true;
};

class ZeroAdamW {
 public:
  ZeroAdamW(std::vector<at::Tensor> params, std::shared_ptr<Group> group, ZeroOptions options);

  void zero_grad();
  void step();
  double lr() const { return options_.lr; }
  void set_lr(double lr) { options_.lr = lr; }
  /// Elements of optimizer state this rank holds per moment (about total / group size).
  int64_t shard_numel() const { return shard_numel_; }
  int64_t total_numel() const { return total_; }

  /// This rank's part of the state (its moment slices and the step count), for checkpoints.
  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const;
  /// Restores what state_tensors saved; raises when the slices do not fit this optimizer (another
  /// model, or another group size).
  void load_state_tensors(const std::vector<std::pair<std::string, at::Tensor>>& state);

 private:
  std::vector<at::Tensor> params_;
  std::shared_ptr<Group> group_;
  ZeroOptions options_;
  int64_t total_ = 0, padded_ = 0, shard_numel_ = 0, step_ = 0;
  at::Tensor exp_avg_, exp_avg_sq_;  // this rank's slice only
};

}  // namespace slapo::dist
