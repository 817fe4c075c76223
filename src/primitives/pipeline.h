// cut_pipeline_stage and the pipeline a schedule with cuts builds into: the root traced down to
// the cut modules, split into one graph per stage, run by dist::PipelineRunner.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "distributed/pipeline.h"
#include "graph/traced_graph.h"
#include "primitives/primitives.h"
#include "primitives/verify.h"

namespace slapo {

class SequenceSplit;

class StageGraph;
namespace dist {
class GradBuckets;
}

/// cut_pipeline_stage(): a pipeline stage ends after this module's call. n cuts make n + 1
/// stages; on p ranks, n + 1 = v p gives each rank v chunks (stages r, r + p, ...), interleaved. Requires: 1) not the root;
/// 2) not cut already; 3) no ancestor or descendant is cut (stages nest nothing).
void cut_pipeline_stage(Schedule& sch, const CallSite& site);

/// The paths of the cut modules below `root`, in tree order.
std::vector<std::string> pipeline_cuts(const Schedule& root);

/// The leaves of a trace that reaches the cut modules: every module whose parent contains a cut
/// and which contains none itself (Slapo's trace_until: the embeddings, the layers, the head).
std::vector<TraceLeaf> pipeline_trace_leaves(Schedule& root, const std::vector<std::string>& cuts);

struct PipelineOptions {
  std::shared_ptr<dist::Group> group;  ///< one rank per stage, in stage order
  int micro_batches = 0;               ///< 0: as many as stages
  dist::PipelineSchedule schedule = dist::PipelineSchedule::OneFOneB;
  /// (the model's logits, the micro-batch's labels) -> its loss; default: the causal-LM loss
  std::function<at::Tensor(const at::Tensor&, const Value&)> loss;
  /// Data parallelism across pipelines: the same stage's ranks of the other pipelines. Gradients
  /// are averaged over it in buckets of `bucket_bytes`, started during the last micro-batch's backward.
  std::shared_ptr<dist::Group> dp_group;
  /// Experts spread by shard_experts are each rank's own: left out of dp_group's buckets, they are
  /// averaged over the ranks holding the same experts (layout.expert_dp_group), in buckets of their
  /// own. `experts_replicated` false: no other rank holds them (ep = dp), nothing to average.
  std::shared_ptr<dist::Group> expert_dp_group;
  bool experts_replicated = true;
  int64_t bucket_bytes = 25 << 20;
  /// After the first trace, drop the weights of the other stages' modules from this rank's copy
  /// of the model (they are never used here), so a rank holds about 1/stages of the weights.
  /// The price: batches of another shape cannot be traced any more.
  bool release_other_stages = true;
  /// Alpa's stages on submeshes of their own, in stage order over the world's ranks (then `group`
  /// is unused). This rank's schedule must shard over its mesh's tp ranks and `dp_group` be its
  /// replicas; `step` takes the whole batch on every rank and gives each replica its rows. Each
  /// replica's gradients are its part of the batch's: `dp_group` sums them (without it, the
  /// optimizer must: optim.zero_adamw{average = false}).
  std::vector<dist::StageMesh> meshes;
};

/// Tensors a pipeline's model takes by keyword (position_ids of packed documents, say), by name.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class Pipeline {
 public:
  /// Checks that the cuts make as many stages as the group has ranks.
  Pipeline(std::shared_ptr<Schedule> root, PipelineOptions options);
  ~Pipeline();

  /// Splits each input, keyword tensor (and `labels`) along dim 0 into the micro-batches, runs
  /// forward and backward of each on this rank's stage, and sums the gradients of parameters
  /// shared by several stages (a tied embedding and LM head) over their stages. Keyword tensors
  /// reach every stage, as the inputs do. Gradients accumulate in .grad as after loss:backward().
  /// Returns the batch's mean loss (the mean of its micro-batches' losses) on every rank.
  double step(const Values& inputs, const at::Tensor& labels, const NamedTensors& keywords = {});

  int stage() const { return runner_.stage(); }
  int stages() const { return runner_.stages(); }
  int micro_batches() const { return micro_batches_; }
  const dist::PipelineRunner& runner() const { return runner_; }
  /// The data-parallel buckets (null without a dp_group of several ranks, or before the first split).
  const dist::GradBuckets* data_parallel() const { return dp_.get(); }
  std::shared_ptr<Module> module() const { return root_->mod(); }
  Schedule& schedule() const { return *root_; }
  /// The loss the pipeline computes, from the unscheduled `reference` on the same inputs, keywords
  /// and labels (verify's expectation): the mean over the micro-batches of each one's loss (with
  /// its load-balancing loss where the model adds one).
  at::Tensor reference_loss(Module& reference, const Values& inputs, const Value& labels,
                            const NamedTensors& keywords = {}) const;

  /// This rank's stage: its parameters, the leaves it calls, and what it exchanges. Known once
  /// the model is traced (at the first step, or `prepare` with an example batch).
  std::vector<at::Tensor> parameters() const;
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const;
  std::vector<std::string> stage_leaves() const;
  /// Parameters used by several stages, by name.
  const std::vector<std::string>& shared_parameters() const { return shared_; }
  /// This rank's parameters shared with a stage of another rank that comes first: that rank counts
  /// them in the gradient norm (each stage holds their summed gradient).
  std::vector<std::string> shared_counted_elsewhere() const;
  /// The replicas gradients are averaged over (null without data parallelism).
  const std::shared_ptr<dist::Group>& data_parallel_group() const { return dp_group_; }
  /// The ranks holding the same experts as this one, which average them (null: none given), and
  /// false when the pipeline was told no other rank holds them.
  const std::shared_ptr<dist::Group>& expert_data_parallel_group() const { return expert_dp_group_; }
  bool experts_replicated() const { return experts_replicated_; }
  /// Parameters of other stages whose weights this rank dropped.
  const std::vector<std::string>& released_parameters() const { return released_; }
  /// Traces and splits the model for batches shaped like `inputs` and `keywords` (done by step
  /// when needed).
  void prepare(const Values& inputs, const NamedTensors& keywords = {});
  std::string describe() const;
  /// One stage this rank runs: its leaves and what crosses into and out of it.
  std::string stage_summary(int index, const char* separator) const;

 private:
  struct Split;
  /// prepare's work on the inputs followed by the keyword tensors named `keyword_names`.
  void prepare_values(const Values& values, const std::vector<std::string>& keyword_names);
  /// The trace for micro-batches of these inputs, the last `keyword_names.size()` of them keywords.
  const Split& split_for(const Values& micro_inputs, const std::vector<std::string>& keyword_names);
  std::vector<Values> micro_batches_of(const Values& inputs) const;
  /// The last stage's outputs' loss: the logits', plus the load-balancing loss where it is traced.
  /// `target`: the micro-batch's labels, or (labels, weight) to scale the logits' loss by.
  at::Tensor stage_loss(const std::vector<at::Tensor>& outputs, const Value& target) const;
  /// With the pipeline's own causal-LM loss, the weight of each micro-batch's loss on this rank: its
  /// part's share of the batch's trained tokens (labels other than -100, as packed documents'
  /// starts are) times the micro-batches (and, on stage meshes, this stage's replicas), so the
  /// step's loss is the batch's mean over its tokens, as one call on the whole batch gives.
  /// `my_chunks`: this rank's rows of each of `label_chunks`. Empty when every weight would be 1.
  std::vector<double> token_weights(const std::vector<at::Tensor>& label_chunks,
                                    const std::vector<at::Tensor>& my_chunks) const;
  void check_expert_replicas(Module& model) const;
  /// context_parallel in the stages: the whole sequence's loss, checks of the layout.
  void split_sequences(const std::shared_ptr<const SequenceSplit>& split);

  std::shared_ptr<Schedule> root_;
  std::vector<std::string> cuts_;
  int micro_batches_;
  std::function<at::Tensor(const at::Tensor&, const Value&)> loss_;
  // A mixture of experts' load-balancing loss: traced with these keywords, the last stage returns
  // it beside the logits, and each micro-batch's loss adds it times the coefficient
  c10::optional<c10::impl::GenericDict> trace_keywords_;
  double aux_loss_coef_ = 0;
  bool token_mean_ = false;  // the loss is the pipeline's own causal-LM loss (not pipeline.loss)
  dist::PipelineRunner runner_;
  // by the keyword inputs' names and the micro-batch's input shapes
  std::map<std::pair<std::vector<std::string>, std::vector<std::vector<int64_t>>>, std::shared_ptr<Split>> splits_;
  const Split* current_ = nullptr;
  std::vector<std::string> shared_;
  std::shared_ptr<dist::Group> dp_group_;
  int64_t bucket_bytes_;
  std::unique_ptr<dist::GradBuckets> dp_;  // over this stage's parameters, made with the first split
  std::shared_ptr<dist::Group> expert_dp_group_;
  bool experts_replicated_;
  std::unique_ptr<dist::GradBuckets> expert_dp_;  // over this rank's spread experts, over expert_dp_group_
  bool release_other_stages_;
  std::vector<std::string> released_;       // parameters emptied on this rank
  // Stage meshes: the ranks of the stages sharing a parameter, by those stages.
  std::map<std::vector<int>, std::shared_ptr<dist::Group>> sharing_groups_;
  void sum_shared_grads_over_meshes();
  Values my_rows(const Values& micro_inputs) const;
};

/// slapo.save(pipe, dir): one Hugging Face checkpoint of the whole model. Each stage's parameters
/// are gathered over its tensor-parallel group, then broadcast stage by stage over the pipeline
/// group; tied weights are written once, under their first name; the lowest rank holding the
/// whole model writes. Every rank of the world calls it, after the first step (or prepare).
void save_pipeline(Pipeline& pipe, const std::string& dir, int64_t max_shard_bytes = 0);

/// slapo.verify with {pipeline = ...}: one step of the pipeline (forward and backward of every
/// micro-batch through the stages) against `reference`, the unscheduled model, on the whole
/// batch: the loss, then every gradient of this rank's stages (sharded ones gathered over their
/// tensor-parallel group). In eval mode: micro-batches draw dropout masks in another order. The
/// loss must be a mean over the batch (the default causal-LM loss is), as the pipeline averages
/// its micro-batches' losses. Raises on every rank, naming the first mismatch; every rank calls it.
VerifyReport verify_pipeline(Pipeline& pipe, Module& reference, Values inputs, const at::Tensor& labels,
                             const VerifyOptions& options, NamedTensors keywords = {});

}  // namespace slapo
