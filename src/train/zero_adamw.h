// ZeRO stage 1: AdamW whose moments are sharded across a data-parallel group. Each rank owns a
// slice of the parameters' concatenation. A step reduce-scatters the gradients (averaged over the
// group) into this rank's slice of them, updates its slice of the parameters with exactly
// torch::optim::AdamW's arithmetic, and all-gathers the parameters; chunk by chunk, in place, so
// it holds nothing whole-size beyond the model's own weights and gradients (a 64 MiB buffer).
// After step() a rank's gradients hold the group's average over its own slice, its own elsewhere.
//
// The parameters come in parts, each sharded over a group of its own: a model whose experts are
// spread over ranks (shard_experts) shards its dense parameters over the data-parallel group and
// its experts over the ranks holding the same experts.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace slapo::dist {
class Group;
}

namespace slapo {

/// The group's buffer for one chunk of every rank's slice, in bytes: a step's only whole-model-sized
/// transient is this, however large the model (the planner prices it).
constexpr int64_t kZeroChunkBytes = int64_t(64) << 20;

struct ZeroOptions {
  double lr = 1e-3, weight_decay = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// Average the gradients over the group (the default), or sum them where each rank's are its part
  /// of the batch's (pipeline stages on meshes of their own).
  bool average = true;
  /// The step's collectives go in chunks of this many bytes over the group (its only buffer).
  int64_t chunk_bytes = kZeroChunkBytes;
};

/// Parameters sharded over one group. A null group is one replica: the state stays whole here.
struct ZeroPart {
  std::vector<at::Tensor> params;
  std::shared_ptr<dist::Group> group;
  std::string state_prefix = "zero.";  ///< names of its state tensors: "zero.exp_avg", ...
};

class ZeroAdamW {
 public:
  ZeroAdamW(std::vector<ZeroPart> parts, ZeroOptions options);

  void zero_grad();
  void step();
  double lr() const { return options_.lr; }
  void set_lr(double lr) { options_.lr = lr; }
  /// Elements of optimizer state this rank holds per moment (about total / group size, summed over the parts).
  int64_t shard_numel() const;
  int64_t total_numel() const;

  /// This rank's part of the state (its moment slices and the step count), for checkpoints.
  std::vector<std::pair<std::string, at::Tensor>> state_tensors() const;
  /// Restores what state_tensors saved; raises when the slices do not fit this optimizer (another
  /// model, or another group size).
  void load_state_tensors(const std::vector<std::pair<std::string, at::Tensor>>& state);

 private:
  struct Shard {
    ZeroPart part;
    int64_t total = 0, padded = 0, numel = 0;  // numel: this rank's slice
    at::Tensor exp_avg, exp_avg_sq;            // this rank's slice only
    int size() const;
    int rank() const;
  };
  void step_part(Shard& s);

  std::vector<Shard> shards_;
  ZeroOptions options_;
  int64_t step_ = 0;
};

}  // namespace slapo
