// The pipeline runtime: one stage per rank of a group, micro-batches flowing forward and
// gradients flowing back over c10d point-to-point messages, in GPipe or 1F1B order.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/module.h"
#include "distributed/group.h"

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

/// A pipeline stage on ranks of its own (Alpa's submesh): `tp` x `dp` consecutive global ranks from
/// `first_rank`, rank = first_rank + dp_rank * tp + tp_rank. Each data-parallel replica runs its
/// share of every micro-batch's rows; stages of different meshes exchange the rows they share.
struct StageMesh {
  int first_rank = 0, tp = 1, dp = 1;
  int size() const { return tp * dp; }
  bool holds(int rank) const { return rank >= first_rank && rank < first_rank + size(); }
  int dp_rank_of(int rank) const { return (rank - first_rank) / tp; }  ///< a rank this mesh holds
  int tp_rank_of(int rank) const { return (rank - first_rank) % tp; }
};

class PipelineRunner {
 public:
  /// Runs one of this rank's chunks: (chunk, the micro-batch's model inputs, the previous stage's
  /// tensors) -> the tensors for the next stage, or the model's output on the last stage.
  using StageFn = std::function<std::vector<at::Tensor>(int, const Values&, const std::vector<at::Tensor>&)>;
  /// (the last stage's outputs, the micro-batch's target) -> a scalar loss.
  using LossFn = std::function<at::Tensor(const std::vector<at::Tensor>&, const Value&)>;

  /// This rank runs stages `group->rank() + c * group->size()` for each of its `chunks`.
  PipelineRunner(std::shared_ptr<Group> group, PipelineSchedule schedule, int chunks = 1);
  /// One stage per mesh, each on its own ranks of `world` (whose ranks the meshes cover in order).
  /// The micro-batch inputs a rank is given are its replica's rows; the loss is divided by the
  /// last stage's replicas too, so each replica's gradients are its part of the batch's: summed
  /// over a stage's replicas, they are the whole batch's.
  PipelineRunner(std::shared_ptr<Group> world, PipelineSchedule schedule, std::vector<StageMesh> meshes);

  /// Forward and backward of every micro-batch. Each micro-batch's loss is divided by their
  /// number, so the accumulated gradients equal those of the mean loss of the whole batch.
  /// Returns that mean loss on every rank of the group.
  double step(const StageFn& stage, const LossFn& loss, const std::vector<Values>& inputs,
              const std::vector<Value>& targets);

  const std::shared_ptr<Group>& group() const { return group_; }
  int stage() const { return stage_; }
  int stages() const { return meshes_.empty() ? group_->size() : static_cast<int>(meshes_.size()); }
  /// The stages' meshes; empty when every stage is one rank of the group.
  const std::vector<StageMesh>& meshes() const { return meshes_; }
  int chunks() const { return chunks_; }
  const PipelineStats& last_stats() const { return stats_; }
  PipelineSchedule schedule() const { return schedule_; }

 private:
  // A rank this one exchanges a micro-batch's tensors with, and which of this rank's rows: all of
  // them when `rows` is 0 (stages of one rank each, or meshes with the same replicas).
  struct Peer {
    int rank;  // in group_
    int64_t first_row = 0, rows = 0;
  };
  // The ranks virtual stage `vs` sends to (forward: the next stage; backward: the previous one)
  // or receives from, for micro-batches of `local_rows` rows on this rank.
  std::vector<Peer> peers(int vs, bool backward, bool sending, int64_t local_rows) const;
  // Messages between virtual stage `from` and from + 1 (forward) or back (gradients).
  void send_activations(const std::vector<at::Tensor>& tensors, int micro_batch, int from, int64_t local_rows);
  std::vector<at::Tensor> recv_activations(int micro_batch, int from, int64_t local_rows);
  void send_piece(const std::vector<at::Tensor>& tensors, int dst, int micro_batch, int from, bool backward);
  std::vector<at::Tensor> recv_piece(int src, int micro_batch, int from, bool backward);
  int tag(int micro_batch, int from, bool backward, int part) const;
  // One rank holding every chunk passes messages to itself through this mailbox, by tag.
  void send_tensor(const at::Tensor& t, int dst, int tag);
  at::Tensor recv_tensor(at::Tensor buffer, int src, int tag);
  std::map<int, at::Tensor> mailbox_;

  std::shared_ptr<Group> group_;
  PipelineSchedule schedule_;
  int chunks_;
  std::vector<StageMesh> meshes_;
  int stage_ = 0;
  at::Device wire_;  // where headers and received tensors live: the backend's device (CPU for Gloo)
  PipelineStats stats_;
};

}  // namespace slapo::dist
