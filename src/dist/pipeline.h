// The pipeline runtime: one stage per rank of a group, micro-batches flowing forward and
// gradients flowing back over c10d point-to-point messages, in GPipe or 1F1B order.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/module.h"
#include "dist/group.h"

namespace slapo::dist {

enum class PipelineSchedule { GPipe, OneFOneB };

/// "gpipe" | "1f1b"; the error names `caller` and the choices.
PipelineSchedule parse_pipeline_schedule(const std::string& name, const char* caller);
const char* pipeline_schedule_name(PipelineSchedule s);

struct PipelineAction {
  enum Kind { Forward, Backward } kind;
  int micro_batch;
  bool operator==(const PipelineAction& o) const { return kind == o.kind && micro_batch == o.micro_batch; }
};

/// The order in which `stage` (of `stages`) runs the forward and backward of each micro-batch.
/// GPipe: every forward, then every backward. 1F1B: stages - stage - 1 warm-up forwards, then
/// one forward and one backward in turn, then the remaining backwards, so a stage holds at most
/// `stages - stage` micro-batches' activations instead of all of them.
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches);

/// Time of the last step on this rank: wall clock, and the part spent computing (not waiting).
struct PipelineStats {
  double wall_s = 0, busy_s = 0;
  int micro_batches = 0, stages = 0;
  /// (p - 1) / (m + p - 1): the idle fraction of an ideal pipeline with equal stages.
  double ideal_bubble() const { return stages <= 1 ? 0.0 : double(stages - 1) / (micro_batches + stages - 1); }
};

class PipelineRunner {
 public:
  /// Runs a stage: (the micro-batch's model inputs, the previous stage's tensors) -> the tensors
  /// for the next stage, or the model's output on the last stage.
  using StageFn = std::function<std::vector<at::Tensor>(const Values&, const std::vector<at::Tensor>&)>;
  /// (the last stage's output, the micro-batch's target) -> a scalar loss.
  using LossFn = std::function<at::Tensor(const at::Tensor&, const Value&)>;

  /// This rank runs stage `group->rank()` of `group->size()`.
  PipelineRunner(std::shared_ptr<Group> group, PipelineSchedule schedule);

  /// Forward and backward of every micro-batch. Each micro-batch's loss is divided by their
  /// number, so the accumulated gradients equal those of the mean loss of the whole batch.
  /// Returns that mean loss on every rank of the group.
  double step(const StageFn& stage, const LossFn& loss, const std::vector<Values>& inputs,
              const std::vector<Value>& targets);

  const std::shared_ptr<Group>& group() const { return group_; }
  int stage() const { return group_->rank(); }
  int stages() const { return group_->size(); }
  const PipelineStats& last_stats() const { return stats_; }
  PipelineSchedule schedule() const { return schedule_; }

 private:
  void send_activations(const std::vector<at::Tensor>& tensors, int micro_batch);
  std::vector<at::Tensor> recv_activations(int micro_batch);

  std::shared_ptr<Group> group_;
  PipelineSchedule schedule_;
  PipelineStats stats_;
};

}  // namespace slapo::dist
