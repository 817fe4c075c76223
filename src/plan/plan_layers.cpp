// The intra-op pass for a plan's chosen mesh: one layer of the model, built at full width with a
// small vocabulary and no initialisation, traced and solved as Alpa's ILP; its shard and sync
// calls become the plan script's shard_layer.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "models/zoo.h"
#include "plan/intra_op.h"
#include "plan/planner.h"

namespace slapo::plan {

void lay_out_layers(Plan& plan, const ModelConfig& config) {
  plan.layer_layout.clear();
  plan.layer_layout_note.clear();
  plan.layer_layout_sharded = false;
  const Candidate& c = plan.chosen().candidate;
  if (c.tp < 2) return;
  nlohmann::json fields = config.json();
  fields[plan.model.type == "gpt2" ? "n_layer" : "num_hidden_layers"] = 1;
  fields["vocab_size"] = 128;  // the embedding and head are not projections the pass shards
  for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"}) fields.erase(id);
  BuildOptions build;
  build.init_weights = false;
  auto model = build_model(ModelConfig(fields), build);

  IntraOpOptions o = intra_op_options(plan.cluster, c.tp, c.dp, plan.work.dtype);
  o.tokens = double(plan.work.batch) / c.micro_batches * double(plan.work.seq);  // a micro-batch, all replicas
  o.bytes_per_element = plan.work.dtype == "bfloat16" ? 2 : 4;
  o.zero = c.zero ? "on" : "off";
  int64_t seq = std::min<int64_t>(16, plan.work.seq);
  Values example = {at::zeros({1, seq}, at::kLong)};
  IntraOpPlan result;
  try {
    result = plan_intra_op_of_copy(model, "plan", example, o);
  } catch (const Error& e) {  // a layer the tracer refuses: the script keeps the reference layout
    std::string why = e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');  // it goes into a one-line comment
    plan.layer_layout_note = fmt::format("the intra-op pass could not plan one layer ({})", why);
    return;
  }

  const std::string layer = layers_path(plan.model) + ".0";
  plan.layer_layout = result.lua_body("layer", layer);
  int sharded = 0, total = 0;
  for (auto& [path, style] : result.strategy)
    if (path.compare(0, layer.size() + 1, layer + ".") == 0) ++total, sharded += style != "replicated";
  plan.layer_layout_note = fmt::format(
      "the {} ILP on one layer for {} x {} ranks (tp x dp), {} of its {} projections sharded ({} variables, {} "
      "constraints)", result.solver, c.tp, c.dp, sharded, total, result.variables, result.constraints);
  plan.layer_layout_sharded = sharded == total;
}

}  // namespace slapo::plan
