// cut_pipeline_stage, and Pipeline: trace the root down to the cuts, split, run the stages.
#include "primitives/pipeline.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/expert_groups.h"
#include "distributed/grad_buckets.h"
#include "distributed/world.h"
#include "graph/pipeline_stages.h"
#include "models/layers.h"
#include "models/sequence_split.h"
#include "models/transformer_ops.h"
#include "models/zoo.h"
#include "primitives/pretrained_slices.h"
#include "primitives/primitives.h"
#include "primitives/rng.h"

namespace slapo {

void cut_pipeline_stage(Schedule& sch, const CallSite& site) {
  if (!sch.parent())
    throw Error("cut_pipeline_stage: the root module cannot end a stage; cut after a layer, e.g. "
                "sch[\"transformer.h.5\"]:cut_pipeline_stage()");
  if (auto list = std::dynamic_pointer_cast<ModuleList>(sch.mod()); list && list->size() > 0)
    throw Error(fmt::format("cut_pipeline_stage: {} is a ModuleList, which its parent never calls as a whole (it "
                            "calls the layers one by one); cut after one of its layers, e.g. sch[\"{}.{}\"]",
                            sch.where(), sch.path(), list->children_in_order()[(list->size() - 1) / 2].first));
  auto root = sch.parent();
  while (root->parent()) root = root->parent();
  // A pipeline is one chain of tensors from the inputs: an encoder-decoder's decoder takes its own
  // tokens as a keyword and reads the encoder's output in every block's cross-attention.
  if (auto* config = model_config(*root->mod()); config && config->model_type() == "t5")
    throw Error(fmt::format("cut_pipeline_stage: {} is inside {}, an encoder-decoder, which pipelines do not carry yet "
                            "(its decoder takes decoder_input_ids beside the inputs and every decoder block reads the "
                            "encoder's output); lay it out with tensor parallelism (slapo.schedules.t5), fully_shard "
                            "or data parallelism",
                            sch.where(), root->mod()->type_name()));
  auto& meta = sch.mod()->meta();
  if (meta.ends_stage) throw Error(fmt::format("cut_pipeline_stage: {} already ends a stage", sch.where()));
  for (auto p = sch.parent(); p; p = p->parent())
    if (p->mod()->meta().ends_stage)
      throw Error(fmt::format("cut_pipeline_stage: {} is inside {}, which already ends a stage; cut after modules "
                              "that do not contain each other", sch.where(), p->where()));
  for (auto& [path, node] : sch.named_schedules())
    if (node->mod()->meta().ends_stage)
      throw Error(fmt::format("cut_pipeline_stage: {} contains {}, which already ends a stage; cut after modules "
                              "that do not contain each other", sch.where(), node->where()));
  meta.ends_stage = true;
  sch.log().append({"cut_pipeline_stage", sch.path(), site.lua_args, site.source});
}

std::vector<std::string> pipeline_cuts(const Schedule& root) {
  std::vector<std::string> out;
  for (auto& [path, node] : root.named_schedules())
    if (node->mod()->meta().ends_stage) out.push_back(path);
  return out;
}

std::vector<TraceLeaf> pipeline_trace_leaves(Schedule& root, const std::vector<std::string>& cuts) {
  std::set<std::string> holds_cut{""};
  for (auto& cut : cuts)
    for (size_t dot = cut.find('.'); dot != std::string::npos; dot = cut.find('.', dot + 1))
      holds_cut.insert(cut.substr(0, dot));
  std::vector<TraceLeaf> out;
  for (auto& [path, node] : root.named_schedules()) {
    auto dot = path.rfind('.');
    std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
    if (holds_cut.count(parent) && !holds_cut.count(path)) out.push_back({node->parent()->mod(), node->name(), path});
  }
  return out;
}

struct Pipeline::Split {
  std::vector<std::shared_ptr<StageGraph>> stages;
  std::map<std::string, std::vector<int>> sharing;    // shared parameter -> the stages using it
  std::vector<std::vector<std::string>> param_names;  // per stage
  std::vector<std::string> my_names;                  // this rank's stages', each once
  std::vector<at::Tensor> my_params;
  std::vector<std::pair<std::string, at::Tensor>> shared;  // used by several stages, stage order
  std::map<std::string, std::vector<int64_t>> shared_sizes;  // their whole shapes (a rank may release one)
};

namespace {

// Model chunks per rank: n stages on p ranks, n a multiple of p (interleaving when n > p).
int chunks_for(size_t stages, const std::shared_ptr<dist::Group>& group) {
  int ranks = group ? group->size() : dist::world()->size();
  return std::max<int>(1, static_cast<int>(stages) / ranks);
}

dist::PipelineRunner make_runner(const PipelineOptions& o, size_t stages) {
  if (o.meshes.empty()) return {o.group ? o.group : dist::world(), o.schedule, chunks_for(stages, o.group)};
  if (o.meshes.size() != stages)
    throw Error(fmt::format("build: the cuts make {} pipeline stages, but pipeline.meshes names {}; give each stage "
                            "one mesh", stages, o.meshes.size()));
  return {dist::world(), o.schedule, o.meshes};
}

// `n` global ranks from `first`, `step` apart.
std::vector<int> ranks_from(int first, int step, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(first + i * step);
  return out;
}

// Fully sharded modules a pipeline cannot run, refused by name: one that contains a cut (the
// trace flattens it and runs its ops one by one, so its calls would never gather: they would see
// slices). On stages with meshes of their own each replica's gradients are its rows' part of the
// batch's, so the units' backward sums them where it would average.
void check_fully_sharded(Schedule& root, bool on_meshes) {
  std::vector<std::pair<std::string, std::shared_ptr<Schedule>>> nodes{{"", nullptr}};
  for (auto& item : root.named_schedules()) nodes.push_back(item);
  std::vector<const Module*> units;
  for (auto& [path, node] : nodes) {
    Schedule& unit = node ? *node : root;
    if (!unit.mod()->meta().fully_shard_root) continue;
    units.push_back(unit.mod().get());
    for (auto& [inner_path, inner] : unit.named_schedules())
      if (inner->mod()->meta().ends_stage)
        throw Error(fmt::format("build: {} is fully sharded and contains the pipeline cut after {}; a pipeline runs "
                                "the modules around its cuts op by op, so their calls would not gather: fully_shard "
                                "the layers each stage calls instead (each block, over layout.dp_group)",
                                unit.where(), inner->where()));
  }
  if (on_meshes) sum_fully_shard_gradients(units);
}

// fully_shard's gathers pair its group's ranks call by call, so they must all run the same
// stage. Checked once per group, by gathering each rank's stage over it (every rank of a group holds
// the same schedule, so each meets the groups in the same order).
void check_fully_shard_groups_within_stages(Module& model, int stage) {
  std::map<int, std::string> first_user;  // group id -> the first module fully sharded over it
  for (auto& item : model.named_modules("", /*include_self=*/true))
    if (auto* m = dynamic_cast<Module*>(item.value().get()))
      for (auto& [name, spec] : m->meta().fully_sharded)
        first_user.emplace(spec.group_id, item.key().empty() ? name : item.key() + "." + name);
  for (auto& [group_id, param] : first_user) {
    auto group = dist::group_by_id(group_id);
    at::Tensor stages = group->all_gather(torch::full({1}, static_cast<float>(stage)), 0, "pipeline").to(at::kInt);
    std::vector<int> runs(stages.data_ptr<int>(), stages.data_ptr<int>() + stages.numel());
    if (std::any_of(runs.begin(), runs.end(), [&](int s) { return s != stage; }))
      throw Error(fmt::format("build: '{}' is fully sharded over ranks {{{}}}, which run pipeline stages {{{}}}; its "
                              "gathers would pair ranks that run different layers: fully shard over the ranks that "
                              "run the same stage (group = layout.dp_group of slapo.parallel.layout)",
                              param, fmt::join(group->ranks(), ", "), fmt::join(runs, ", ")));
  }
}

// The causal-LM loss of whole sequences' logits: the default loss, and the unscheduled model's
// under context_parallel.
at::Tensor whole_sequence_loss(const at::Tensor& logits, const Value& labels) {
  if (!labels.isTensor())
    throw Error("pipeline: step needs {labels = t} for the causal-LM loss (or pass pipeline.loss to build)");
  return causal_lm_loss(logits, labels.toTensor());
}

std::vector<std::vector<int64_t>> shapes_of(const Values& inputs) {
  std::vector<std::vector<int64_t>> out;
  for (auto& v : inputs) out.push_back(v.isTensor() ? v.toTensor().sizes().vec() : std::vector<int64_t>{-1});
  return out;
}

// A batch as the trace takes it: the inputs, then the keyword tensors, each cut into micro-batches
// along its rows and read by every stage that uses it.
struct Batch {
  Values values;
  std::vector<std::string> keyword_names;
};

Batch batch_of(const Values& inputs, const NamedTensors& keywords) {
  if (inputs.empty()) throw Error("pipeline: pass the model's inputs, e.g. pipe:step(ids, {labels = ids})");
  Batch batch{inputs, {}};
  for (auto& [name, t] : keywords) {
    if (name == "labels") throw Error("pipeline: labels are the loss's, not a keyword of the model");
    if (std::find(batch.keyword_names.begin(), batch.keyword_names.end(), name) != batch.keyword_names.end())
      throw Error(fmt::format("pipeline: keyword '{}' given twice", name));
    const int64_t rows = inputs[0].isTensor() && inputs[0].toTensor().dim() ? inputs[0].toTensor().size(0) : -1;
    if (!t.defined() || t.dim() == 0 || t.size(0) != rows)
      throw Error(fmt::format("pipeline: keyword '{}' must be a tensor of the inputs' {} rows (it is cut into the "
                              "micro-batches with them), got {}",
                              name, rows, t.defined() ? fmt::format("[{}]", fmt::join(t.sizes(), ", ")) : "none"));
    batch.values.emplace_back(t);
    batch.keyword_names.push_back(name);
  }
  return batch;
}

}  // namespace

Pipeline::Pipeline(std::shared_ptr<Schedule> root, PipelineOptions options)
    : root_(std::move(root)),
      cuts_(pipeline_cuts(*root_)),
      micro_batches_(options.micro_batches),
      loss_(std::move(options.loss)),
      runner_(make_runner(options, cuts_.size() + 1)),
      dp_group_(std::move(options.dp_group)),
      bucket_bytes_(options.bucket_bytes),
      expert_dp_group_(std::move(options.expert_dp_group)),
      experts_replicated_(options.experts_replicated),
      release_other_stages_(options.release_other_stages) {
  if (cuts_.empty())
    throw Error("build: no pipeline stage was cut; call cut_pipeline_stage() on the module after which each stage "
                "ends (e.g. sch[\"transformer.h.5\"]:cut_pipeline_stage())");
  // A mixture of experts' load-balancing loss reads every layer's router logits: traced asking for
  // it, the model returns it beside the logits, the logits of earlier stages' layers crossing the
  // cuts to the last stage like any tensor a later stage needs
  if (auto* config = model_config(*root_->mod());
      config && config->model_type() == "mixtral" && config->flag("output_router_logits", false)) {
    c10::impl::GenericDict keywords(c10::StringType::get(), c10::AnyType::get());
    keywords.insert("output_router_logits", true);
    trace_keywords_ = keywords;
    aux_loss_coef_ = config->number("router_aux_loss_coef", 0.001);
  }
  if ((static_cast<int>(cuts_.size()) + 1) % runner_.stages() != 0) {
    const int p = runner_.stages();
    throw Error(fmt::format("build: {} cut{} ({}) make{} {} pipeline stages, which do not divide among the {} ranks of "
                            "the pipeline group (pipeline = {{group = ...}}); every rank runs as many stages (one, or "
                            "several interleaved), so cut {} or {} times for this group",
                            cuts_.size(), cuts_.size() == 1 ? "" : "s", fmt::join(cuts_, ", "),
                            cuts_.size() == 1 ? "s" : "", cuts_.size() + 1, p, p - 1, 2 * p - 1));
  }
  if (!runner_.meshes().empty()) {  // this rank's schedule and replicas must be its mesh's
    auto& mesh = runner_.meshes()[stage()];
    const int me = dist::world()->rank();
    auto tp_ranks = ranks_from(mesh.first_rank + mesh.dp_rank_of(me) * mesh.tp, 1, mesh.tp);
    auto dp_ranks = ranks_from(mesh.first_rank + mesh.tp_rank_of(me), mesh.tp, mesh.dp);
    auto group_ranks = [](const std::shared_ptr<dist::Group>& g) {
      return g ? g->ranks() : std::vector<int>{dist::world()->rank()};
    };
    if (group_ranks(root_->group()) != tp_ranks)
      throw Error(fmt::format("build: this rank runs stage {} on tp {} x dp {}, so its schedule must shard over ranks "
                              "{{{}}}, not {{{}}}; create the schedule with {{group = layout.tp_group}} of "
                              "slapo.parallel.stage_layout", stage(), mesh.tp, mesh.dp, fmt::join(tp_ranks, ", "),
                              fmt::join(group_ranks(root_->group()), ", ")));
    if (dp_group_ && dp_group_->ranks() != dp_ranks)  // absent: the optimizer sums them (ZeRO-1)
      throw Error(fmt::format("build: this rank runs stage {} on tp {} x dp {}, so pipeline.dp_group must be ranks "
                              "{{{}}}, not {{{}}} (layout.dp_group of slapo.parallel.stage_layout)", stage(), mesh.tp,
                              mesh.dp, fmt::join(dp_ranks, ", "), fmt::join(group_ranks(dp_group_), ", ")));
  }
  check_fully_sharded(*root_, !runner_.meshes().empty());
  if (dp_group_ && dp_group_->size() > 1 && !expert_parallel_blocks(*root_->mod()).empty())
    check_expert_replicas(*root_->mod());
  if (micro_batches_ == 0) micro_batches_ = runner_.stages();
  if (micro_batches_ < 1)
    throw Error(fmt::format("build: pipeline micro_batches must be at least 1, got {}", micro_batches_));
  token_mean_ = !loss_;  // the pipeline's own causal-LM loss, whose mean it knows how to weigh
  if (auto split = sequence_split_of(*root_->mod())) split_sequences(split);
  else if (!loss_) loss_ = whole_sequence_loss;
}

// context_parallel inside each stage: the last stage's logits are this rank's tokens', so the loss
// is the whole sequence's over the cp group, and each cp rank's gradients (its part x N) must be
// averaged over a dp_group that holds the cp group.
void Pipeline::split_sequences(const std::shared_ptr<const SequenceSplit>& split) {
  const std::string what = fmt::format("build: {} splits its sequences ({})", root_->where(), split->describe());
  if (!runner_.meshes().empty())
    throw Error(what + "; stage meshes give the ranks of a stage different rows, so they do not run with it (use a "
                       "pipeline group from slapo.parallel.layout{pp =, cp =})");
  if (loss_)
    throw Error(what + "; pipeline.loss would see this rank's tokens' logits alone: the pipeline computes the whole "
                       "sequence's causal-LM loss itself (leave pipeline.loss out)");
  auto cp_ranks = dist::group_by_id(split->group_id())->ranks();
  auto dp_ranks = dp_group_ ? dp_group_->ranks() : std::vector<int>{};
  for (int r : cp_ranks)
    if (std::find(dp_ranks.begin(), dp_ranks.end(), r) == dp_ranks.end())
      throw Error(fmt::format("{}; each rank's gradients are its part of the sequence's, averaged over "
                              "pipeline.dp_group, which must hold the cp group's ranks {{{}}} (layout.dp_group of "
                              "slapo.parallel.layout{{pp =, cp =}}), not {{{}}}",
                              what, fmt::join(cp_ranks, ", "), fmt::join(dp_ranks, ", ")));
  loss_ = [split](const at::Tensor& logits, const Value& labels) {
    if (!labels.isTensor())
      throw Error("pipeline: step needs {labels = t} for the whole sequence's causal-LM loss (context_parallel)");
    return split_causal_lm_loss(*split, logits, labels.toTensor(), "pipeline");
  };
}

Pipeline::~Pipeline() = default;

const Pipeline::Split& Pipeline::split_for(const Values& micro_inputs, const std::vector<std::string>& keyword_names) {
  auto key = std::make_pair(keyword_names, shapes_of(micro_inputs));
  auto found = splits_.find(key);
  if (found != splits_.end()) return *found->second;
  if (!released_.empty()) {
    auto keywords = [](const std::vector<std::string>& names) {
      return names.empty() ? std::string() : fmt::format(" with keywords {}", fmt::join(names, ", "));
    };
    auto& first = splits_.begin()->first;
    throw Error(fmt::format("pipeline: batches shaped [{}]{} need a new trace of the whole model, but this rank dropped "
                            "the other stages' weights after the first trace (shaped [{}]{}); keep the batch's shape and "
                            "keywords, or build with pipeline = {{release_other_stages = false}}",
                            fmt::join(key.second.front(), ", "), keywords(keyword_names),
                            fmt::join(first.second.front(), ", "), keywords(first.first)));
  }

  // Trace by need, for this micro-batch shape; the trace's forward must not move the RNG.
  Module& model = *root_->mod();
  auto rng = RngSnapshot::capture(model);
  auto traced =
      trace_module(model, root_->where(), micro_inputs, pipeline_trace_leaves(*root_, cuts_), trace_keywords_,
                   keyword_names);
  rng.restore();
  auto split = std::make_shared<Split>();
  split->stages = split_stages(*traced, cuts_, root_->where());
  check_fully_shard_groups_within_stages(model, stage());

  // Which parameters each stage uses: its graph's own, and its leaves'.
  std::unordered_map<const c10::TensorImpl*, std::string> name_of;
  for (auto& [name, p] : unique_named_parameters(model)) name_of[p.unsafeGetTensorImpl()] = name;
  std::map<std::string, std::vector<int>> users;
  std::map<std::string, at::Tensor> by_name;
  for (auto& stage : split->stages) {
    std::set<std::string> names;
    auto add = [&](const at::Tensor& p) {
      auto n = name_of.find(p.unsafeGetTensorImpl());
      if (n == name_of.end()) return;
      if (names.insert(n->second).second) users[n->second].push_back(stage->index());
      by_name[n->second] = p;
    };
    for (auto& p : stage->direct_params()) add(p);
    for (auto& leaf : stage->leaves())
      for (auto& [name, p] : unique_named_parameters(*root_->at(leaf)->mod())) add(p);
    split->param_names.emplace_back(names.begin(), names.end());
  }
  std::set<std::string> seen;
  std::map<std::string, int> local_users;  // how many of this rank's chunks use each parameter
  for (int c = 0; c < runner_.chunks(); ++c)
    for (auto& name : split->param_names[c * stages() + stage()]) {
      ++local_users[name];
      if (seen.insert(name).second) {
        split->my_names.push_back(name);
        split->my_params.push_back(by_name[name]);
      }
    }
  // this rank's fully sharded layers prefetch one another in the order each of its stages calls
  // them (there is no fully sharded root above them to chain them)
  for (int c = 0; c < runner_.chunks(); ++c) {
    std::vector<const Module*> calls;
    for (auto& leaf : split->stages[c * stages() + stage()]->leaves()) calls.push_back(root_->at(leaf)->mod().get());
    chain_fully_shard_prefetch(calls);
  }
  for (auto& [name, stages] : users)
    if (stages.size() > 1) {
      split->shared.emplace_back(name, by_name[name]);
      split->shared_sizes[name] = by_name[name].sizes().vec();
      split->sharing[name] = stages;
      if (!runner_.meshes().empty() && !sharing_groups_.count(stages)) {  // every rank, in name order
        std::vector<int> ranks;
        for (int s : stages) {
          auto& mesh = runner_.meshes()[s];
          for (int r = 0; r < mesh.size(); ++r) ranks.push_back(mesh.first_rank + r);
        }
        sharing_groups_[stages] = dist::new_group(ranks);
      }
    }
  shared_.clear();
  for (auto& s : split->shared) shared_.push_back(s.first);
  {  // the checkpoint slices build deferred: those this rank's stages use, now known
    std::unordered_set<const c10::TensorImpl*> wanted;
    for (auto& [name, p] : unique_named_parameters(model))
      if (!release_other_stages_ || seen.count(name)) wanted.insert(p.unsafeGetTensorImpl());
    read_deferred_slices(model, wanted);
  }
  if (release_other_stages_) {  // the other stages' weights are never read on this rank again
    torch::NoGradGuard no_grad;
    std::set<std::string> mine(split->my_names.begin(), split->my_names.end());
    for (auto& [name, p] : unique_named_parameters(model))
      if (!mine.count(name)) {
        p.set_data(torch::empty({0}, p.options()));
        p.mutable_grad() = at::Tensor();
        released_.push_back(name);
      }
  }
  if (!dp_ && dp_group_ && dp_group_->size() > 1) {
    for (auto& [name, count] : local_users)
      if (count > 1)
        throw Error(fmt::format("pipeline: '{}' is used by {} of this rank's chunks; data parallelism over "
                                "interleaved chunks that share a parameter is not supported", name, count));
    std::vector<std::pair<std::string, at::Tensor>> named, experts;
    auto averaged = fully_sharded_tensors(model);  // already, by fully_shard's backward
    auto spread = expert_group_by_tensor(model);   // each rank's own experts
    for (size_t i = 0; i < split->my_params.size(); ++i) {
      auto* impl = split->my_params[i].unsafeGetTensorImpl();
      if (averaged.count(impl)) continue;
      (spread.count(impl) ? experts : named).emplace_back(split->my_names[i], split->my_params[i]);
    }
    dp_ = std::make_unique<dist::GradBuckets>(std::move(named), dp_group_, bucket_bytes_);
    dp_->set_backward_passes(micro_batches_);
    dp_->set_average(runner_.meshes().empty());  // on meshes each replica's gradients are its part
    if (!experts.empty() && expert_dp_group_ && expert_dp_group_->size() > 1) {
      expert_dp_ = std::make_unique<dist::GradBuckets>(std::move(experts), expert_dp_group_, bucket_bytes_);
      expert_dp_->set_backward_passes(micro_batches_);
    }
  }
  return *(splits_[key] = split);
}

void Pipeline::prepare(const Values& inputs, const NamedTensors& keywords) {
  auto batch = batch_of(inputs, keywords);
  prepare_values(batch.values, batch.keyword_names);
}

void Pipeline::prepare_values(const Values& values, const std::vector<std::string>& keyword_names) {
  Values micro;
  for (auto& v : values) {
    if (!v.isTensor()) throw Error(fmt::format("pipeline: inputs must be tensors, got a {}", v.tagKind()));
    auto& t = v.toTensor();
    if (t.dim() == 0 || t.size(0) % micro_batches_ != 0)
      throw Error(fmt::format("pipeline: the batch of {} rows does not split into {} micro-batches; use a batch size "
                              "divisible by micro_batches", t.dim() ? t.size(0) : 0, micro_batches_));
    micro.emplace_back(t.narrow(0, 0, t.size(0) / micro_batches_));
  }
  current_ = &split_for(my_rows(micro), keyword_names);
}

Values Pipeline::my_rows(const Values& micro_inputs) const {
  if (runner_.meshes().empty()) return micro_inputs;
  auto& mesh = runner_.meshes()[stage()];
  const int dp_rank = mesh.dp_rank_of(dist::world()->rank());
  Values out;
  for (auto& v : micro_inputs) {
    if (!v.isTensor()) {
      out.push_back(v);
      continue;
    }
    auto& t = v.toTensor();
    for (auto& m : runner_.meshes())
      if (t.dim() == 0 || t.size(0) % m.dp != 0)
        throw Error(fmt::format("pipeline: micro-batches of {} rows do not split among stage {}'s {} data-parallel "
                                "replicas; use a batch of micro_batches x a multiple of every stage's dp",
                                t.dim() ? t.size(0) : 0, &m - runner_.meshes().data(), m.dp));
    out.emplace_back(t.narrow(0, dp_rank * (t.size(0) / mesh.dp), t.size(0) / mesh.dp));
  }
  return out;
}

// The batch's inputs cut into the step's micro-batches along their rows.
std::vector<Values> Pipeline::micro_batches_of(const Values& inputs) const {
  std::vector<Values> micro(micro_batches_);
  for (auto& v : inputs) {
    auto chunks = v.toTensor().chunk(micro_batches_, 0);
    for (int i = 0; i < micro_batches_; ++i) micro[i].emplace_back(chunks[i]);
  }
  return micro;
}

double Pipeline::step(const Values& inputs, const at::Tensor& labels, const NamedTensors& keywords) {
  auto batch = batch_of(inputs, keywords);
  prepare_values(batch.values, batch.keyword_names);
  std::vector<Values> micro = micro_batches_of(batch.values);
  for (auto& m : micro) m = my_rows(m);
  std::vector<Value> targets;
  if (labels.defined()) {
    if (labels.dim() == 0 || labels.size(0) % micro_batches_ != 0)
      throw Error(fmt::format("pipeline: labels of {} rows do not split into {} micro-batches", labels.dim() ? labels.size(0) : 0,
                              micro_batches_));
    auto chunks = labels.chunk(micro_batches_, 0);
    std::vector<at::Tensor> mine;
    for (auto& c : chunks) mine.push_back(my_rows({c})[0].toTensor());
    auto weights = token_weights(chunks, mine);
    for (size_t i = 0; i < chunks.size(); ++i)  // a weight travels with its labels to the last stage's loss
      targets.push_back(weights.empty() ? Value(mine[i]) : Value(c10::ivalue::Tuple::create({mine[i], weights[i]})));
  }
  auto& graphs = current_->stages;
  const int ranks = stages(), rank = stage();
  double loss = runner_.step([&](int chunk, const Values& in, const std::vector<at::Tensor>& received) {
    return graphs[chunk * ranks + rank]->run(in, received);
  }, [this](const std::vector<at::Tensor>& outputs, const Value& labels) { return stage_loss(outputs, labels); },
                            micro, targets);
  if (dp_) dp_->finish();  // before the shared sum, which would otherwise be averaged away
  if (expert_dp_) expert_dp_->finish();
  if (!runner_.meshes().empty()) {
    sum_shared_grads_over_meshes();
    return loss;
  }

  // A parameter used by several stages (a tied embedding and LM head) gets the sum of their grads.
  std::set<std::string> mine(current_->my_names.begin(), current_->my_names.end());
  for (auto& [name, p] : current_->shared) {
    // every rank of the pipeline adds its part; a stage that does not use the parameter (released
    // on its rank) adds zeros of the whole shape, as an all-reduce needs the same size everywhere
    // summed in place where this rank holds the gradient (a view of dp_group's bucket stays one)
    const bool held = mine.count(name) && p.grad().defined() && p.grad().is_contiguous();
    at::Tensor g = held                ? p.grad().detach()
                   : p.grad().defined() ? p.grad().detach().clone(at::MemoryFormat::Contiguous)
                                        : torch::zeros(current_->shared_sizes.at(name), p.options());
    runner_.group()->all_reduce(g, "pipeline");
    if (mine.count(name) && !held) p.mutable_grad() = g;
  }
  return loss;
}

// A stage whose experts shard_experts spread over replicas averages them over the ranks holding
// the same experts alone: the pipeline must be told which (or that none do).
void Pipeline::check_expert_replicas(Module& model) const {
  auto [block, id] = expert_parallel_blocks(model).front();
  auto spread = dist::group_by_id(id)->ranks();
  if (!runner_.meshes().empty())
    throw Error(fmt::format("build: {} spreads its experts over ranks {{{}}}; expert parallelism on stage meshes is not "
                            "supported: lay the pipeline out with slapo.parallel.layout{{pp =, ep =}}",
                            block, fmt::join(spread, ", ")));
  if (!expert_dp_group_ && experts_replicated_)
    throw Error(fmt::format("build: {} spreads its experts over ranks {{{}}} (shard_experts), each rank's own, which "
                            "pipeline.dp_group's buckets must leave out: give pipeline.expert_dp_group = "
                            "layout.expert_dp_group (the ranks holding the same experts), or expert_dp_group = false "
                            "when no other rank holds them (ep = dp)",
                            block, fmt::join(spread, ", ")));
}

std::vector<double> Pipeline::token_weights(const std::vector<at::Tensor>& label_chunks,
                                            const std::vector<at::Tensor>& my_chunks) const {
  if (!token_mean_ || label_chunks.empty()) return {};
  std::vector<at::Tensor> counts;  // the batch's micro-batches', then this replica's part of each
  for (auto* chunks : {&label_chunks, &my_chunks})
    for (auto& labels : *chunks) {
      if (labels.dim() != 2) return {};  // the loss refuses these by name
      counts.push_back(next_token_targets(labels).ne(-100).sum().to(at::kCPU, at::kDouble));
    }
  auto host = at::stack(counts);  // one read of every count
  const double* n = host.data_ptr<double>();
  const size_t m = label_chunks.size();
  const double total = std::accumulate(n, n + m, 0.0);
  if (total == 0) return {};
  // on stage meshes each of the last stage's dp replicas computes its own rows' mean, and the
  // replicas' parts are summed, 1/dp each
  const double dp = runner_.meshes().empty() ? 1.0 : runner_.meshes()[stage()].dp;
  std::vector<double> weights;
  for (size_t i = 0; i < m; ++i) weights.push_back(n[m + i] * static_cast<double>(m) * dp / total);
  if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 1.0; })) return {};
  return weights;
}

at::Tensor Pipeline::stage_loss(const std::vector<at::Tensor>& outputs, const Value& target) const {
  const size_t expected = trace_keywords_ ? 2 : 1;
  if (outputs.size() != expected)
    throw Error(fmt::format("pipeline: the last stage returned {} tensors; the loss needs {} (the logits{})",
                            outputs.size(), expected, trace_keywords_ ? " and the load-balancing loss" : ""));
  const bool weighted = target.isTuple();  // (labels, the micro-batch's weight): see token_weights
  const Value labels = weighted ? target.toTupleRef().elements()[0] : target;
  const double weight = weighted ? target.toTupleRef().elements()[1].toDouble() : 1.0;
  // a part that trains no token (every label -100) adds nothing: its mean would be 0 / 0
  at::Tensor loss = weight == 0.0 ? outputs[0].sum() * 0.0 : loss_(outputs[0], labels);
  if (weighted && weight != 0.0) loss = loss * weight;
  if (trace_keywords_) loss = loss + aux_loss_coef_ * outputs[1].to(loss.device());
  return loss;
}

at::Tensor Pipeline::reference_loss(Module& reference, const Values& inputs, const Value& labels,
                                    const NamedTensors& keywords) const {
  auto batch = batch_of(inputs, keywords);
  // the whole batch's loss, as the step's weights make its micro-batches' (the mean over every
  // trained token); the unscheduled model's logits are the whole sequence's where stages split it
  auto whole_batch = [&] { return reference(with_keywords(batch.values, batch.keyword_names, c10::nullopt)).toTensor(); };
  if (sequence_split_of(*root_->mod())) return whole_sequence_loss(whole_batch(), labels);
  if (!trace_keywords_) return loss_(whole_batch(), labels);
  if (!runner_.meshes().empty())
    throw Error("verify: a pipeline on stage meshes adds each replica's load-balancing loss on its own rows, which "
                "one call of the unscheduled model does not compute; verify it on one pipeline group");
  // the micro-batches as step cuts them, each with its own load-balancing loss
  std::vector<Values> micro = micro_batches_of(batch.values);
  auto label_chunks = labels.isTensor() ? labels.toTensor().chunk(micro_batches_, 0) : std::vector<at::Tensor>{};
  auto weights = token_weights(label_chunks, label_chunks);
  at::Tensor sum;
  for (int i = 0; i < micro_batches_; ++i) {
    auto out = reference(with_keywords(micro[i], batch.keyword_names, trace_keywords_)).toTupleRef().elements();
    Value target = label_chunks.empty() ? Value()
                   : weights.empty()    ? Value(label_chunks[i])
                                        : Value(c10::ivalue::Tuple::create({label_chunks[i], weights[i]}));
    at::Tensor loss = stage_loss({out[0].toTensor(), out[1].toTensor()}, target);
    sum = sum.defined() ? sum + loss : loss;
  }
  return sum / micro_batches_;
}

std::vector<std::string> Pipeline::shared_counted_elsewhere() const {
  std::vector<std::string> out;
  if (!current_) return out;
  std::set<std::string> mine(current_->my_names.begin(), current_->my_names.end());
  for (auto& [name, stages_using] : current_->sharing) {
    int first = *std::min_element(stages_using.begin(), stages_using.end());
    bool first_is_mine = runner_.meshes().empty() ? first % stages() == stage() : first == stage();
    if (mine.count(name) && !first_is_mine) out.push_back(name);
  }
  return out;
}

// Each rank of a stage holds its replica's part of the stage's gradient of a shared parameter
// (gathered over its tp group when sharded), or after dp_group's sum the whole of it; a sum over
// every rank of the sharing stages, each weighted by one over the ranks holding the same, adds the
// stages' gradients once each. Without dp_group each replica keeps 1/dp of it for the optimizer's sum.
void Pipeline::sum_shared_grads_over_meshes() {
  auto specs = shard_specs_by_tensor(*root_->mod());
  auto& mesh = runner_.meshes()[stage()];
  const double copies = dp_ ? mesh.size() : mesh.tp, keep = dp_ ? 1.0 : 1.0 / mesh.dp;
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : current_->shared) {
    auto& group = sharing_groups_.at(current_->sharing.at(name));
    if (!group->contains_me()) continue;
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p.detach());
    else if (!p.grad().is_contiguous()) p.mutable_grad() = p.grad().contiguous();
    // summed in the gradient's own memory: it stays the view of dp_group's bucket it is (a new
    // tensor would hold a second vocabulary matrix, and the bucket would copy again next step)
    at::Tensor g = p.grad().detach();
    auto spec = specs.find(p.unsafeGetTensorImpl());
    if (spec != specs.end()) {
      const ShardSpec& split = *spec->second;
      g = split.regroup(root_->group()->all_gather(split.padded(g), split.axis, "pipeline"));
    }
    g.div_(copies);
    group->all_reduce(g, "pipeline");
    if (keep != 1.0) g.mul_(keep);
    if (spec != specs.end()) p.grad().copy_(spec->second->local(g));
  }
}

std::vector<at::Tensor> Pipeline::parameters() const {
  if (!current_) throw Error("pipeline: the stages are not known before the model is traced; run step once, or "
                             "prepare(inputs) with an example batch");
  return current_->my_params;
}

std::vector<std::pair<std::string, at::Tensor>> Pipeline::named_parameters() const {
  auto params = parameters();
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < params.size(); ++i) out.emplace_back(current_->my_names[i], params[i]);
  return out;
}

std::vector<std::string> Pipeline::stage_leaves() const {
  if (!current_) throw Error("pipeline: the stages are not known before the model is traced; run step once, or "
                             "prepare(inputs) with an example batch");
  std::vector<std::string> out;
  for (int c = 0; c < runner_.chunks(); ++c)
    for (auto& leaf : current_->stages[c * stages() + stage()]->leaves()) out.push_back(leaf);
  return out;
}

namespace {

// What crosses into and out of one stage, as the description says it: the last stage's outputs
// are the model's, which go to the loss, not to another stage.
std::string traffic(const StageGraph& s, bool last) {
  if (last) return fmt::format("receives {}, sends none: its output is the model's", s.received_count());
  return fmt::format("receives {}, sends {} tensor{}", s.received_count(), s.sent_count(),
                     s.sent_count() == 1 ? "" : "s");
}

}  // namespace

std::string Pipeline::stage_summary(int index, const char* separator) const {
  auto& s = *current_->stages[index];
  return fmt::format("{}stage {}: {} ({})", separator, index, fmt::join(s.leaves(), ", "),
                     traffic(s, index + 1 == static_cast<int>(current_->stages.size())));
}

std::string Pipeline::describe() const {
  const int chunks = runner_.chunks();
  if (chunks > 1) {
    std::vector<int> mine;
    for (int c = 0; c < chunks; ++c) mine.push_back(c * stages() + stage());
    std::string out = fmt::format("pipeline of {} stages on {} ranks, {} chunks each ({} interleaved, {} micro-batches), "
                                  "cut after {}; this rank runs stages {}",
                                  stages() * chunks, stages(), chunks, dist::pipeline_schedule_name(runner_.schedule()),
                                  micro_batches_, fmt::join(cuts_, ", "), fmt::join(mine, ", "));
    if (current_) {
      for (int index : mine) out += stage_summary(index, index == mine.front() ? ": " : "; ");
      out += fmt::format(" ({} parameter tensors)", current_->my_params.size());
    }
    return out;
  }
  std::string out = fmt::format("pipeline of {} stages ({}, {} micro-batches), cut after {}; this rank runs stage {}",
                                stages(), dist::pipeline_schedule_name(runner_.schedule()), micro_batches_,
                                fmt::join(cuts_, ", "), stage());
  if (!runner_.meshes().empty()) {
    std::vector<std::string> meshes;
    for (auto& m : runner_.meshes()) meshes.push_back(fmt::format("{}x{}", m.tp, m.dp));
    out += fmt::format(" of stage meshes (tp x dp) {}", fmt::join(meshes, " "));
  }
  if (current_) {
    auto& s = *current_->stages[stage()];
    out += fmt::format(": {} ({} parameter tensors; {})", fmt::join(s.leaves(), ", "), current_->my_params.size(),
                       traffic(s, stage() + 1 == stages()));
    if (!shared_.empty()) out += fmt::format("; shared with another stage: {}", fmt::join(shared_, ", "));
  }
  return out;
}

}  // namespace slapo
