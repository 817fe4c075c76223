// The pipeline runtime: one stage per rank of a group, micro-batches flowing forward and
// gradients flowing back over c10d point-to-point messages, in GPipe or 1F1B order.
#pragma once

#include <functional>
#include <map>
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
  int chunk = 0;  ///< which of the rank's model chunks (interleaved schedules)
  bool operator==(const PipelineAction& o) const {
    return kind == o.kind && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

/// The order in which rank `stage` (of `stages` ranks) runs the forward and backward of each
/// micro-batch. GPipe: every forward, then every backward. 1F1B: stages - stage - 1 warm-up
/// forwards, then one forward and one backward in turn, then the remaining backwards, so a stage
/// holds at most `stages - stage` micro-batches' activations instead of all of them.
/// With `chunks` > 1 each rank holds that many model chunks (virtual stage c * stages + rank):
/// GPipe runs chunk by chunk; 1F1B becomes Megatron's interleaved 1F1B, whose warm-up is
/// 2 (stages - stage - 1) + (chunks - 1) stages forwards and whose bubble shrinks by `chunks`
/// (micro_batches must then be a multiple of `stages`).
std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches,
                                             int chunks = 1);

/// Time of the last step on this rank: wall clock, and the part spent computing (not waiting).
struct PipelineStats {
  double wall_s = 0, busy_s = 0;
  int micro_batches = 0, stages = 0, chunks = 1;
  /// (p - 1) / (v m + p - 1): the idle fraction of an ideal pipeline of p ranks with equal stages
  /// and v chunks per rank ((p - 1) / (m + p - 1) without interleaving).
  double ideal_bubble() const {
    return stages <= 1 ? 0.0 : double(stages - 1) / (double(chunks) * micro_batches + stages - 1);
  }
};

class PipelineRunner {
 public:
  /// Runs one of this rank's chunks: (chunk, the micro-batch's model inputs, the previous stage's
  /// tensors) -> the tensors for the next stage, or the model's output on the last stage.
  using StageFn = std::function<std::vector<at::Tensor>(int, const Values&, const std::vector<at::Tensor>&)>;
  /// (the last stage's output, the micro-batch's target) -> a scalar loss.
  using LossFn = std::function<at::Tensor(const at::Tensor&, const Value&)>;

  /// This rank runs stages `group->rank() + c * group->size()` for each of its `chunks`.
  PipelineRunner(std::shared_ptr<Group> group, PipelineSchedule schedule, int chunks = 1);

  /// Forward and backward of every micro-batch. Each micro-batch's loss is divided by their
  /// number, so the accumulated gradients equal those of the mean loss of the whole batch.
  /// Returns that mean loss on every rank of the group.
  double step(const StageFn& stage, const LossFn& loss, const std::vector<Values>& inputs,
              const std::vector<Value>& targets);

  const std::shared_ptr<Group>& group() const { return group_; }
  int stage() const { return group_->rank(); }
  int stages() const { return group_->size(); }
  int chunks() const { return chunks_; }
  const PipelineStats& last_stats() const { return stats_; }
  PipelineSchedule schedule() const { return schedule_; }

 private:
  // Messages between virtual stage `from` and from + 1 (forward) or back (gradients).
  void send_activations(const std::vector<at::Tensor>& tensors, int micro_batch, int from);
  std::vector<at::Tensor> recv_activations(int micro_batch, int from);
  int tag(int micro_batch, int from, bool backward, int part) const;
  // One rank holding every chunk passes messages to itself through this mailbox, by tag.
  void send_tensor(const at::Tensor& t, int dst, int tag);
  at::Tensor recv_tensor(at::Tensor buffer, int src, int tag);
  std::map<int, at::Tensor> mailbox_;

  std::shared_ptr<Group> group_;
  PipelineSchedule schedule_;
  int chunks_;
  at::Device wire_;  // where headers and received tensors live: the backend's device (CPU for Gloo)
  PipelineStats stats_;
};

}  // namespace slapo::dist
