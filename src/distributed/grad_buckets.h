// Data-parallel gradient averaging in buckets that start their all-reduce while backward is
// still running (as DDP's Reducer does), instead of one all-reduce per parameter afterwards.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/group.h"

namespace torch::autograd {
struct Node;
}

namespace slapo::dist {

class GradBuckets {
 public:
  /// Groups `params` into buckets of about `bucket_bytes`, in reverse order (backward produces
  /// the last layers' gradients first), and hooks each parameter's gradient accumulator.
  GradBuckets(std::vector<std::pair<std::string, at::Tensor>> params, std::shared_ptr<Group> group,
              int64_t bucket_bytes);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  /// How many backward passes make one step's gradients (micro-batches, accumulation steps): a
  /// parameter is ready when its gradient was accumulated that many times.
  void set_backward_passes(int n);
  int backward_passes() const { return passes_; }
  /// Average over the group (the default), or sum where each rank's gradients are already its
  /// part of the whole (pipeline stages on meshes of their own).
  void set_average(bool average) { average_ = average; }

  /// Starts the buckets not started yet (parameters without a gradient count as zeros), waits
  /// for all, and leaves each gradient averaged over the group. Then the next step may begin.
  void finish();

  std::vector<std::vector<std::string>> bucket_names() const;
  /// Buckets whose all-reduce began during backward in the last step (before finish).
  int started_early() const { return last_started_early_; }

 private:
  struct Bucket;
  struct Hook;
  void on_accumulated(size_t param);
  void start_ready_buckets(bool all);
  bool grads_are_views(const Bucket& b) const;

  std::vector<std::pair<std::string, at::Tensor>> params_;
  std::shared_ptr<Group> group_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;   // param -> bucket
  std::vector<int> accumulated_;    // param -> gradient accumulations this step
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;  // accumulator, hook key
  int passes_ = 1;
  size_t next_bucket_ = 0;  // buckets start strictly in order, so all ranks agree
  int started_early_ = 0, last_started_early_ = 0;
  bool finishing_ = false;
  bool average_ = true;
};

}  // namespace slapo::dist
