// One layer traced for the planner, its layouts solved per mesh; and the chosen plan's layer
// layout as the script's shard_layer.
#include "plan/layer_layouts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/torch_error.h"
#include "models/layers.h"
#include "models/zoo.h"
#include "plan/planner.h"
#include "primitives/primitives.h"

namespace slapo::plan {

namespace {

// The layer list of a model built with one layer: its only ModuleList, found by walking the tree
// rather than by name (the names are the model's; the reference schedules say them for users).
std::vector<std::string> module_lists(const std::shared_ptr<Module>& m, const std::string& path) {
  std::vector<std::string> out;
  if (std::dynamic_pointer_cast<ModuleList>(m)) out.push_back(path);
  for (auto& [name, child] : m->children_in_order())
    for (auto& found : module_lists(child, path.empty() ? name : path + "." + name)) out.push_back(found);
  return out;
}

std::string first_layer_path(const std::shared_ptr<Module>& model, const std::string& name) {
  auto lists = module_lists(model, "");
  if (lists.size() != 1)
    throw Error(fmt::format("plan: {} built with one layer has {} module lists ({}), not one list of layers", name,
                            lists.size(), fmt::join(lists, ", ")));
  return lists.front() + ".0";
}

}  // namespace

PassLayouts::PassLayouts(const ModelConfig& config, const ModelShape& shape, const Cluster& cluster,
                         const Workload& work)
    : cluster_(cluster), work_(work), hidden_(shape.hidden) {
  auto start = std::chrono::steady_clock::now();
  nlohmann::json fields = config.json();
  if (shape.type == "gpt_neo") {  // one global layer: a local one differs by its mask alone
    fields["num_layers"] = 1;
    fields["attention_types"] = nlohmann::json::array({nlohmann::json::array({nlohmann::json::array({"global"}), 1})});
    fields.erase("attention_layers");
  } else {
    fields[shape.type == "gpt2" ? "n_layer" : "num_hidden_layers"] = 1;
  }
  fields["vocab_size"] = 128;  // the embedding and head are the reference schedule's, not the pass's
  for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"}) fields.erase(id);
  BuildOptions build;
  build.init_weights = false;
  auto model = build_model(ModelConfig(fields), build);
  layer_ = first_layer_path(model, shape.name);
  auto layer = module_at(model, layer_);
  if (!layer) throw Error(fmt::format("plan: {} has no layer at '{}'", shape.name, layer_));
  // One short forward up to the layer records its inputs; the layer is then traced alone on the meta
  // device, on their shapes: its CPU weights (7 GB for GPT-3 175B) are never touched, so never paged in.
  // A prime length, so that no other dimension is taken for the sequence's (IntraOpOptions::seq).
  int64_t seq = std::min<int64_t>(13, work.seq);
  struct ReachedLayer {};  // not a std::exception: the modules' error wrapping lets it pass
  int hook = layer->add_forward_pre_hook([](Module&, Values&) { throw ReachedLayer{}; });
  try {
    torch::NoGradGuard no_grad;
    (*model)({at::zeros({1, seq}, at::kLong)});
  } catch (const ReachedLayer&) {
  }
  layer->remove_hook(hook);
  Values examples = examples_like_last_call(*layer, layer_, "plan", "a zoo model");
  for (auto& x : examples) x = x.toTensor().to(at::kMeta);
  // the same layer built on the meta device (LibTorch 1.13 moves no parameter there, and has no
  // meta embedding, so the model above stays on the CPU)
  build.tensor_options = build.tensor_options.device(at::kMeta);
  auto on_meta = module_at(build_model(ModelConfig(fields), build), layer_);
  problem_ = std::make_unique<IntraOpProblem>(on_meta, "plan: " + layer_, examples);
  trace_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

IntraOpOptions PassLayouts::options(int tp, int dp, bool sequence) const {
  IntraOpOptions o = intra_op_options(cluster_, tp, dp, work_.dtype);
  o.tokens = double(work_.batch) * double(work_.seq);
  o.seq = double(work_.seq);
  o.bytes_per_element = work_.dtype == "bfloat16" ? 2 : 4;
  o.zero = ZeroChoice::Off;
  o.sequence = sequence;
  return o;
}

const PassLayouts::Solved& PassLayouts::solved(int tp, int dp, bool sequence) const {
  auto [it, fresh] = solved_.try_emplace({tp, dp, sequence});
  Solved& s = it->second;
  if (!fresh) return s;
  try {
    s.plan = problem_->solve(options(tp, dp, sequence));
  } catch (const std::exception&) {  // the search's threads must not throw: Megatron's layout stands
    return s;
  }
  const IntraOpPlan& p = *s.plan;
  auto share = [](double part, double whole) { return whole > 0 ? part / whole : 0.0; };
  s.layout.split_compute = share(p.split_flops, p.flops);
  s.layout.split_params = share(p.split_params, p.params);
  s.layout.split_activations = share(p.split_saved, p.saved);
  s.layout.forward_all_reduces = p.forward_reduced_per_token / double(hidden_);
  s.layout.backward_all_reduces = p.backward_reduced_per_token / double(hidden_);
  return s;
}

TpLayout PassLayouts::on(int tp, int dp, bool sequence) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return solved(tp, dp, sequence).layout;
}

IntraOpPlan PassLayouts::plan_for(int tp, int dp, bool sequence) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Solved& s = solved(tp, dp, sequence);
  return s.plan ? *s.plan : problem_->solve(options(tp, dp, sequence));  // raises what the search could not
}

LayerPricing price_layers(const std::string& how, const ModelConfig& config, const ModelShape& shape,
                          const Cluster& cluster, const Workload& work) {
  check_workload(work);
  check_positions(config, shape, work);
  if (how == "megatron") return {nullptr, "Megatron's layout (every projection sharded) prices tensor parallelism"};
  if (how != "ilp")
    throw Error(fmt::format("plan: --layer-costs '{}' is not a pricing (choices: ilp, megatron)", how));
  if (cluster.per_node < 2) return {nullptr, ""};  // no tensor parallelism to price
  if (shape.experts > 0)  // the pass prices one dense layer's projections
    return {nullptr, fmt::format("Megatron's layout prices tensor parallelism: the intra-op pass prices dense layers, "
                                 "and {}'s experts each run on the rows routed to them", shape.name)};
  if (shape.type == "t5" || shape.type == "albert")  // the pass traces a model with one list of layers
    return {nullptr, fmt::format("Megatron's layout prices tensor parallelism: the intra-op pass traces one list of "
                                 "layers, and {} has {}", shape.name,
                                 shape.type == "t5" ? "an encoder's and a decoder's" : "shared groups of them")};
  try {
    return {std::make_shared<const PassLayouts>(config, shape, cluster, work), ""};
  } catch (const std::exception& e) {  // a layer the tracer refuses: Megatron's layout, and the reason
    std::string why = message_without_backtrace(e);
    std::replace(why.begin(), why.end(), '\n', ' ');  // it goes into one-line comments
    return {nullptr, fmt::format("Megatron's layout prices tensor parallelism: the intra-op pass could not trace "
                                 "one layer ({})", why)};
  }
}

namespace {

// The pass's layer layout on tp x dp ranks, and a note saying what it is.
std::pair<IntraOpPlan, std::string> pass_layout(const PassLayouts& pass, int tp, int dp, bool sequence) {
  IntraOpPlan result = pass.plan_for(tp, dp, sequence);
  int sharded = 0, total = 0;
  for (auto& [path, style] : result.strategy) ++total, sharded += style != "replicated";
  return {result,
          fmt::format("the {} ILP on one layer for {} x {} ranks (tp x dp{}), {} of its {} projections sharded ({} "
                      "variables, {} constraints)", result.solver, tp, dp,
                      sequence ? ", its tokens split between projections" : "", sharded, total, result.variables,
                      result.constraints)};
}

}  // namespace

void lay_out_layers(Plan& plan, const LayerPricing& pricing) {
  plan.trace_s = pricing.layouts ? pricing.layouts->trace_s() : 0.0;
  plan.layer_layout.reset();
  plan.mesh_layouts.clear();
  plan.layer_layout_note = pricing.note;
  const Candidate& c = plan.chosen().candidate;
  if (!pricing.layouts) return;
  if (c.pp() > 1 && !c.uniform_mesh()) {
    for (auto& s : c.stages) {
      bool known = std::any_of(plan.mesh_layouts.begin(), plan.mesh_layouts.end(), [&](const Plan::MeshLayout& m) {
        return m.tp == s.tp && m.dp == s.dp && m.sequence == s.sequence;
      });
      if (s.tp < 2 || known) continue;
      auto [layout, note] = pass_layout(*pricing.layouts, s.tp, s.dp, s.sequence);
      plan.mesh_layouts.push_back({s.tp, s.dp, s.sequence, std::move(layout), note});
    }
    return;
  }
  if (c.tp < 2) return;
  std::tie(plan.layer_layout, plan.layer_layout_note) = pass_layout(*pricing.layouts, c.tp, c.dp, c.sequence);
}

}  // namespace slapo::plan
