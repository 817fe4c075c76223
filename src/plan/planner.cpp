// The grid over uniform plans, its ranking, and the plan as text: a table and a Lua script.
#include "plan/planner.h"

#include <algorithm>

#include "core/error.h"

namespace slapo::plan {

namespace {

std::string describe(const Candidate& c) {
  return fmt::format("tp {} x dp {}{}{}", c.tp, c.dp, c.checkpoint ? ", checkpoint" : "", c.zero ? ", zero-1" : "");
}

double gib(double bytes) { return bytes / double(1ull << 30); }

}  // namespace

Plan plan_uniform(const ModelShape& model, const Cluster& cluster, const Workload& work) {
  if (work.batch < 1 || work.seq < 1)
    throw Error(fmt::format("plan: --batch and --seq must be >= 1, got {} and {}", work.batch, work.seq));
  Plan plan{model, fmt::format("\"{}\"", model.name), cluster, work, {}};
  const int n = cluster.devices();
  for (int tp = 1; tp <= std::min(n, cluster.per_node); ++tp) {
    if (n % tp != 0 || model.heads % tp != 0 || model.kv_heads % tp != 0) continue;
    int dp = n / tp;
    if (work.batch % dp != 0) continue;
    for (bool checkpoint : {false, true})
      for (bool zero : {false, true}) {
        if (zero && dp == 1) continue;
        Candidate c{tp, dp, checkpoint, zero};
        plan.ranked.push_back({c, estimate(model, cluster, work, c), ""});
      }
  }
  if (plan.ranked.empty())
    throw Error(fmt::format("plan: no layout of {} devices fits: tensor parallelism must divide {} heads ({} key/value "
                            "heads) within a node of {}, and data parallelism must divide --batch {}",
                            n, model.heads, model.kv_heads, cluster.per_node, work.batch));
  // Fitting plans first, fastest first; ties (equal predictions) keep the simpler plan.
  std::stable_sort(plan.ranked.begin(), plan.ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.estimate.fits != b.estimate.fits) return a.estimate.fits;
    if (!a.estimate.fits) return a.estimate.peak_bytes < b.estimate.peak_bytes;
    return a.estimate.step_s < b.estimate.step_s;
  });
  const Ranked& best = plan.ranked.front();
  if (!best.estimate.fits)
    throw Error(fmt::format("plan: {} ({:.2f}B parameters) does not fit {} x {}: the most sharded plan ({}) needs "
                            "{:.1f} GiB per device, {:.1f} GiB more than the {:.1f} GiB usable",
                            model.name, model.total_params / 1e9, cluster.nodes, cluster.per_node,
                            describe(best.candidate), gib(best.estimate.peak_bytes),
                            gib(best.estimate.peak_bytes - 0.9 * cluster.device.memory_bytes),
                            gib(0.9 * cluster.device.memory_bytes)));
  for (auto& r : plan.ranked) {
    if (&r == &plan.ranked.front()) r.verdict = "chosen";
    else if (!r.estimate.fits)
      r.verdict = fmt::format("needs {:.1f} GiB of {:.1f}", gib(r.estimate.peak_bytes), gib(0.9 * cluster.device.memory_bytes));
    else r.verdict = fmt::format("{:.0f}% slower", 100.0 * (r.estimate.step_s / best.estimate.step_s - 1.0));
  }
  return plan;
}

std::string Plan::summary() const {
  std::string out = fmt::format("plan for {} ({:.1f}M parameters) on {} x {} {}, batch {} x seq {}\n", model.name,
                                model.total_params / 1e6, cluster.nodes, cluster.per_node, cluster.device.name,
                                work.batch, work.seq);
  out += fmt::format("  {:<32} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "plan", "step s", "compute", "tp comm",
                     "dp comm", "GiB/rank", "");
  for (auto& r : ranked)
    out += fmt::format("  {:<32} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.2f}  {}\n", describe(r.candidate),
                       r.estimate.step_s, r.estimate.compute_s, r.estimate.tp_comm_s, r.estimate.dp_comm_s,
                       gib(r.estimate.peak_bytes), r.verdict);
  return out;
}

std::string Plan::lua_source(int steps) const {
  const Ranked& best = chosen();
  const Candidate& c = best.candidate;
  std::string schedules = model.type == "gpt2" ? "gpt2" : model.type == "bert" ? "bert" : "llama";
  std::string out;
  out += fmt::format("-- slapo-lua plan: {} on {} x {} {}, batch {} x seq {}\n", model.name, cluster.nodes,
                     cluster.per_node, cluster.device.name, work.batch, work.seq);
  out += fmt::format("-- Run it: slapo-lua run --nproc {} plan.lua   (edit the plan table and run again)\n",
                     cluster.devices());
  out += "--\n-- Predicted (step seconds, GiB per rank), every uniform plan considered:\n";
  for (auto& r : ranked)
    out += fmt::format("--   {:<32} {:>9.4f} s {:>7.2f} GiB  {}\n", describe(r.candidate), r.estimate.step_s,
                       gib(r.estimate.peak_bytes), r.verdict);
  // the knobs' choices and the planner's prediction for each plan that fits
  std::vector<int> tp_choices;
  std::string predictions;
  for (auto& r : ranked) {
    if (std::find(tp_choices.begin(), tp_choices.end(), r.candidate.tp) == tp_choices.end())
      tp_choices.push_back(r.candidate.tp);
    if (!r.estimate.fits) continue;
    predictions += fmt::format("  {{ tp = {}, checkpoint = {}, zero = {}, step_s = {:.6g}, peak_gib = {:.3g} }},\n",
                               r.candidate.tp, r.candidate.checkpoint ? "1.0" : "0.0",
                               r.candidate.zero ? "true" : "false", r.estimate.step_s, gib(r.estimate.peak_bytes));
  }
  std::sort(tp_choices.begin(), tp_choices.end());
  out += fmt::format(R"(
local plan = {{
  model = {},  -- a preset name, a Hugging Face directory or a table of config fields
  tp = {},           -- tensor parallel ranks (Megatron layout from slapo.schedules.{})
  dp = {},           -- data parallel replicas
  checkpoint = {},  -- fraction of layers whose activations are recomputed in backward
  zero = {},     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  batch = {}, seq = {}, steps = {}, lr = 1e-4,
}}

-- `slapo-lua tune plan.lua --nproc {}` runs the plans above as knobs, the best predicted first
-- (a plain run keeps the table's values).
local function knob(name, choices, default)
  for _, c in ipairs(choices) do
    if c == default then
      return slapo.knob(name, choices, default)
    end
  end
  table.insert(choices, default)  -- an edited table: its value is a choice too
  return slapo.knob(name, choices, default)
end
local devices = plan.tp * plan.dp
plan.tp = knob("tp", {{ {} }}, plan.tp)
plan.dp = math.floor(devices / plan.tp)
plan.checkpoint = knob("checkpoint", {{ 0.0, 1.0 }}, plan.checkpoint)
plan.zero = knob("zero", {{ false, true }}, plan.zero)
slapo.predict({{
{}}})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({{ tp = plan.tp }})
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, {{ group = layout.tp_group }})
local vocab = slapo.models.config(model).vocab_size
-- the schedule is checked against the unscheduled model (outputs and gradients) before training
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, {{ math.max(1, math.floor(plan.batch / plan.dp)), plan.seq }})
local report = slapo.verify(sch, {{ example }}, {{}}, function(s)
  for _, note in ipairs(require("slapo.schedules.{}").schedule(s, {{ checkpoint = plan.checkpoint }})) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
end)
if slapo.dist.rank() == 0 then
  print(("verify: %d output(s) and %d gradients match the unscheduled model"):format(report.outputs, report.gradients))
end
local result = slapo.train({{
  model = slapo.build(sch), layout = layout, optimizer = plan.zero and "zero_adamw" or "adamw",
  data = {{ vocab = vocab, batch = math.floor(plan.batch / plan.dp), seq = plan.seq }}, steps = plan.steps, lr = plan.lr,
}})
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f"):format(plan.steps, result.final_loss))
end
)",
                     model_source, c.tp, schedules, c.dp, c.checkpoint ? "1.0" : "0.0", c.zero ? "true" : "false",
                     work.batch, work.seq, steps, cluster.devices(), fmt::join(tp_choices, ", "), predictions,
                     schedules);
  return out;
}

}  // namespace slapo::plan
