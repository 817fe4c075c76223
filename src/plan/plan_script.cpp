// The plan as a Lua schedule script: the planner's prediction and alternatives in comments, a
// `plan` table a person edits, the reference schedule applied and verified, then training. One
// stage: tp x dp with knobs for the tuner; several: a 1F1B pipeline with each stage's layers and
// checkpointing spelled out.
#include <algorithm>

#include "core/error.h"
#include "plan/planner.h"

namespace slapo::plan {

namespace {

std::string schedules_of(const ModelShape& model) {
  return model.type == "gpt2" ? "gpt2" : model.type == "bert" ? "bert" : "llama";
}

// The script's first lines: what was planned, how to run it, and the plans considered.
std::string script_header(const Plan& plan) {
  std::string out = fmt::format("-- slapo-lua plan: {} on {} x {} {}, batch {} x seq {}\n", plan.model.name,
                                plan.cluster.nodes, plan.cluster.per_node, plan.cluster.device.name, plan.work.batch,
                                plan.work.seq);
  out += fmt::format("-- Run it: slapo-lua run --nproc {} plan.lua   (edit the plan table and run again)\n",
                     plan.cluster.devices());
  out += "--\n-- Predicted (step seconds, GiB per rank), the best plans considered:\n";
  auto line = [](const Ranked& r) {
    return fmt::format("--   {:<52} {:>9.4f} s {:>7.2f} GiB  {}\n", r.candidate.describe(), r.estimate.step_s,
                       to_gib(r.estimate.peak_bytes), r.verdict);
  };
  const size_t shown = std::min<size_t>(plan.ranked.size(), 20);
  for (size_t i = 0; i < shown; ++i) out += line(plan.ranked[i]);
  if (plan.ranked.size() > shown) out += fmt::format("--   ... and {} more\n", plan.ranked.size() - shown);
  for (auto& r : plan.unrestricted) out += line(r);
  return out;
}

// `phase(text)`: the script says what it does now, so a long check is not silence.
constexpr const char* kPhaseSource = R"(-- what the script is doing now, from rank 0 on stderr (checking a large model takes a while)
local function phase(text)
  if slapo.dist.rank() == 0 then io.stderr:write("plan: ", text, "\n") end
end
)";

// `local function shard_layer(layer) ... end` from the intra-op pass, the layout the predictions
// price; `local shard_layer = nil` (the reference schedule's layout) without it.
// With sequence parallelism, the layout expects its layer's tokens split: the first layer of each
// stage splits them (`scatter`) and the last gathers them again. `sequence_parallel(s, first, last)`
// does that to the layers first..last; the script checks that plan.sequence and shard_layer agree.
std::string shard_layer_source(const Plan& plan) {
  const bool splits = plan.chosen().candidate.sequence && !plan.layer_layout.empty();
  std::string out;
  if (plan.layer_layout.empty())
    out = fmt::format("\n-- each layer's tensor parallelism: the reference schedule's (Megatron's) layout{}\n"
                      "local shard_layer = nil\n",
                      plan.layer_layout_note.empty() ? "" : "; " + plan.layer_layout_note);
  else
    out = fmt::format(
        "\n-- Each layer's tensor parallelism, from the intra-op pass: {}.\n"
        "-- The predictions above price this layout. Edit a line (keep a projection whole, say) and run again;\n"
        "-- `local shard_layer = nil` in its place runs the reference schedule's (Megatron's) layout.\n"
        "local function shard_layer(layer)\n{}end\n",
        plan.layer_layout_note, plan.layer_layout);
  out += fmt::format(R"(local shard_layer_splits_tokens = {}  -- it was written for sequence parallelism
if plan.tp > 1 and plan.sequence ~= (shard_layer ~= nil and shard_layer_splits_tokens) then
  error(("plan.sequence = %s, but the layers' layout (shard_layer) %s the tokens: plan again with the other, or set "
    .. "sequence = %s"):format(tostring(plan.sequence), plan.sequence and "keeps whole" or "splits",
    tostring(not plan.sequence)))
end
-- sequence parallelism: layers first..last take their tokens split over the tp ranks, and hand them on whole
local function sequence_parallel(layers, first, last)
  if not plan.sequence or plan.tp < 2 then return end
  layers[first]:sync("fwd_pre", "scatter", {{ axis = 1 }})
  layers[last]:sync("fwd_post", "all_gather", {{ axis = 1 }})
end
)",
                     splits ? "true" : "false");
  return out;
}

// A pipeline script's end: `plan.steps` measured steps of `pipe` with `opt` on `ids`, and the line
// bench/plan_calibration reads.
std::string pipeline_steps_source() {
  return R"(collectgarbage()  -- the verified copies go before memory is measured
-- tensor memory per rank: the stage's weights, and the most the steps held on top
phase(("training %d steps"):format(plan.steps))
local loss, times = nil, {}
local peak_mib = slapo.peak_tensor_mib(function()
  for step = 1, plan.steps do
    local start = slapo.clock()
    opt:zero_grad()
    if plan.dtype == "bfloat16" then
      loss = slapo.autocast("bf16", function() return pipe:step(ids, { labels = ids }) end)
    else
      loss = pipe:step(ids, { labels = ids })
    end
    opt:step()
    if step > 1 then table.insert(times, slapo.clock() - start) end  -- the first step allocates
  end
end)
table.sort(times)
local fullest = math.max(unpack(slapo.dist.all_gather(slapo.tensor({ pipe:num_params() * 4 / 2 ^ 20 + peak_mib })):tolist()))
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f, %.4f s/step, %.0f MiB of tensors on the fullest rank"):format(plan.steps,
    loss, times[math.floor((#times + 1) / 2)] or 0, fullest))
end
)";
}

// Both pipeline forms' model and schedule: make_schedule() over this rank's tp group, and apply(s):
// the reference schedule with `shard_layer`, each stage's checkpointing and sequence parallelism,
// and a cut after each stage.
std::string stages_schedule_source(const ModelShape& model) {
  return fmt::format(R"(local function make_schedule()
  slapo.manual_seed(0)
  local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
    or slapo.models.build(plan.model)
  return slapo.create_schedule(model, {{ group = layout.tp_group }}), slapo.models.config(model).vocab_size
end

-- the tensor parallelism (over this rank's tp group), then each stage's checkpointing and the cuts
local function apply(s)
  for _, note in ipairs(require("slapo.schedules.{}").schedule(s, {{ checkpoint = 0, layer = shard_layer }})) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  local layers, placed = s["{}"]:children(), 0
  for i, stage in ipairs(plan.stages) do
    for l = placed + 1, placed + stage.layers do
      if stage.checkpoint then layers[l]:checkpoint() end
    end
    sequence_parallel(layers, placed + 1, placed + stage.layers)
    placed = placed + stage.layers
    if i < #plan.stages then layers[placed]:cut_pipeline_stage() end
  end
  assert(placed == #layers, ("plan.stages hold %d layers; the model has %d"):format(placed, #layers))
end
)", schedules_of(model), layers_path(model));
}

std::string pipeline_source(const Plan& plan, int steps) {
  const Ranked& best = plan.chosen();
  const Candidate& c = best.candidate;
  const ModelShape& model = plan.model;
  std::string out = script_header(plan);
  out += "--\n-- The chosen pipeline, stage by stage (micro-batch seconds, GiB per rank):\n";
  std::string stages;
  int first = 0;
  for (size_t s = 0; s < c.stages.size(); ++s) {
    const Stage& st = c.stages[s];
    const StageEstimate& e = best.estimate.stages[s];
    out += fmt::format("--   stage {}: layers {}..{}{}, {:.4f} s, {:.2f} GiB\n", s, first, first + st.layers - 1,
                       st.checkpoint ? " (checkpointed)" : "", e.time_s(), to_gib(e.peak_bytes));
    stages += fmt::format("    {{ layers = {}, checkpoint = {} }},\n", st.layers, st.checkpoint ? "true" : "false");
    first += st.layers;
  }
  out += fmt::format(R"(
local plan = {{
  model = {},  -- a preset name, a Hugging Face directory or a table of config fields
  tp = {},           -- tensor parallel ranks in every stage (Megatron layout from slapo.schedules.{})
  dp = {},           -- data parallel replicas of the pipeline
  zero = {},     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  stages = {{        -- pipeline stages in order: how many layers each holds, and whether they are recomputed
{}  }},
  micro_batches = {},  -- 1F1B: each replica's batch is cut into this many
  sequence = {},  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = {}, seq = {}, steps = {}, lr = 1e-4,
  dtype = "{}",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}}

local pp = #plan.stages
assert(slapo.dist.world_size() == plan.tp * plan.dp * pp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp * pp, plan.tp * plan.dp * pp))
local parallel = require("slapo.parallel")
local layout = parallel.layout({{ tp = plan.tp, pp = pp }})
local replica_batch = math.floor(plan.batch / plan.dp)
assert(replica_batch * plan.dp == plan.batch and replica_batch % plan.micro_batches == 0,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))

{}
{phase}
{}
-- the pipeline is checked against the unscheduled model (loss and gradients) before training;
-- a verified pipeline keeps only its stage's weights, so training builds the model again
phase(("building the model on %d ranks, %d stages"):format(slapo.dist.world_size(), pp))
local sch, vocab = make_schedule()
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, {{ replica_batch, plan.seq }})
phase("checking the pipeline against the unscheduled model: loss and gradients")
local report = slapo.verify(sch, {{ example }}, {{ pipeline = {{ group = layout.pp_group,
  micro_batches = plan.micro_batches }} }}, apply)
if slapo.dist.rank() == 0 then
  print(("verify: the pipeline's loss and %d gradients match the unscheduled model"):format(report.gradients))
end
sch = make_schedule()
apply(sch)
local pipe = slapo.build(sch, {{ pipeline = {{ group = layout.pp_group, micro_batches = plan.micro_batches,
  schedule = "1f1b", dp_group = not plan.zero and layout.dp_group or nil }} }})
slapo.manual_seed(100 + layout.dp_rank)  -- each data-parallel replica its own batch
local ids = slapo.randint(0, vocab, {{ replica_batch, plan.seq }})
pipe:prepare(ids)
local opt = plan.zero and slapo.optim.zero_adamw(pipe:parameters(), {{ lr = plan.lr, weight_decay = 0,
  group = layout.dp_group }}) or slapo.optim.adamw(pipe:parameters(), {{ lr = plan.lr, weight_decay = 0 }})
{})",
                     plan.model_source, c.tp, schedules_of(model), c.dp, c.zero ? "true" : "false", stages,
                     c.micro_batches, c.sequence ? "true" : "false", plan.work.batch, plan.work.seq, steps, plan.work.dtype, shard_layer_source(plan),
                     stages_schedule_source(model), pipeline_steps_source(), fmt::arg("phase", kPhaseSource));
  return out;
}


// Each stage mesh's layer layout from the intra-op pass, by "TxD" (", sequence" when it splits the
// tokens between projections); a mesh without one takes the reference schedule's layout.
std::string mesh_layouts_source(const Plan& plan) {
  std::string out = "\n-- Each stage mesh's layer layout (tensor parallelism), by tp x dp";
  if (plan.mesh_layouts.empty())
    return out + fmt::format(": the reference schedule's (Megatron's){}.\nlocal shard_layers = {{}}\n",
                             plan.layer_layout_note.empty() ? "" : "; " + plan.layer_layout_note);
  out += ", from the intra-op pass; the predictions price these.\n-- A mesh missing here runs the reference "
         "schedule's (Megatron's) layout.\n";
  for (auto& m : plan.mesh_layouts) out += fmt::format("--   {}x{}: {}\n", m.tp, m.dp, m.note);
  out += "local shard_layers = {\n";
  for (auto& m : plan.mesh_layouts) {
    std::string body;  // indented once more, inside the table
    for (size_t at = 0; at < m.body.size();) {
      size_t end = m.body.find('\n', at);
      if (end == std::string::npos) end = m.body.size();
      body += "  " + m.body.substr(at, end - at) + "\n";
      at = end + 1;
    }
    out += fmt::format("  [\"{}x{}{}\"] = function(layer)\n{}  end,\n", m.tp, m.dp, m.sequence ? ", sequence" : "",
                       body);
  }
  return out + "}\n";
}

// Stages on meshes of their own (Alpa's submeshes): slapo.parallel.stage_layout gives each stage
// its ranks, and each rank applies its own stage's tensor parallelism.
std::string meshes_source(const Plan& plan, int steps) {
  const Ranked& best = plan.chosen();
  const Candidate& c = best.candidate;
  const ModelShape& model = plan.model;
  std::string out = script_header(plan);
  out += "--\n-- The chosen pipeline, stage by stage, each on ranks of its own (micro-batch seconds, GiB per rank):\n";
  std::string stages;
  int first = 0, rank = 0;
  for (size_t s = 0; s < c.stages.size(); ++s) {
    const Stage& st = c.stages[s];
    const StageEstimate& e = best.estimate.stages[s];
    out += fmt::format("--   stage {}: layers {}..{} on tp {} x dp {} (ranks {}..{}){}{}{}, {:.4f} s, {:.2f} GiB\n", s,
                       first, first + st.layers - 1, st.tp, st.dp, rank, rank + st.tp * st.dp - 1,
                       st.checkpoint ? ", checkpointed" : "", st.zero ? ", ZeRO-1" : "",
                       st.sequence ? ", sequence parallel" : "", e.time_s(), to_gib(e.peak_bytes));
    stages += fmt::format("    {{ layers = {}, tp = {}, dp = {}, checkpoint = {}, zero = {}, sequence = {} }},\n",
                          st.layers, st.tp, st.dp, st.checkpoint, st.zero, st.sequence);
    first += st.layers;
    rank += st.tp * st.dp;
  }
  out += fmt::format(R"(
local plan = {{
  model = {},  -- a preset name, a Hugging Face directory or a table of config fields
  -- pipeline stages in order, each on ranks of its own: how many layers it holds, its mesh (tp ranks
  -- x dp replicas), whether its layers are recomputed, ZeRO-1 over its replicas, sequence parallelism
  stages = {{
{}  }},
  micro_batches = {},  -- 1F1B: the batch is cut into this many; each stage's replicas split every one
  batch = {}, seq = {}, steps = {}, lr = 1e-4,
  dtype = "{}",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}}

local meshes, ranks = {{}}, 0
for i, stage in ipairs(plan.stages) do
  meshes[i] = {{ tp = stage.tp, dp = stage.dp }}
  ranks = ranks + stage.tp * stage.dp
end
assert(slapo.dist.world_size() == ranks, ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(ranks, ranks))
local layout = require("slapo.parallel").stage_layout(meshes)
local mine = plan.stages[layout.stage + 1]  -- this rank's stage
local micro_batch, rows = math.floor(plan.batch / plan.micro_batches), 1  -- rows: the fewest all replicas divide
for i, stage in ipairs(plan.stages) do
  assert(micro_batch * plan.micro_batches == plan.batch and micro_batch % stage.dp == 0,
    ("plan: batch %d does not split into %d micro-batches that stage %d's %d replicas divide"):format(plan.batch,
      plan.micro_batches, i - 1, stage.dp))
  local a, b = rows, stage.dp
  while b > 0 do a, b = b, a % b end
  rows = rows * stage.dp / a
end
{}local shard_layer = shard_layers[("%dx%d%s"):format(mine.tp, mine.dp, mine.sequence and ", sequence" or "")]
if mine.tp > 1 and mine.sequence and not shard_layer then
  error(("plan: stage %d has sequence = true, but no layer layout splits the tokens on tp %d x dp %d: plan again, or "
    .. "set sequence = false"):format(layout.stage, mine.tp, mine.dp))
end
-- sequence parallelism on this rank's mesh: layers first..last take their tokens split over its tp ranks
local function sequence_parallel(layers, first, last)
  if not mine.sequence or mine.tp < 2 then return end
  layers[first]:sync("fwd_pre", "scatter", {{ axis = 1 }})
  layers[last]:sync("fwd_post", "all_gather", {{ axis = 1 }})
end
{phase}
{}
-- the pipeline is checked against the unscheduled model (loss and gradients) before training, on the
-- fewest rows that every stage's replicas divide; a verified pipeline keeps only its stage's weights,
-- so training builds the model again
local sch, vocab = make_schedule()
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, {{ plan.micro_batches * rows, plan.seq }})
phase("checking the pipeline against the unscheduled model: loss and gradients")
local report = slapo.verify(sch, {{ example }}, {{ pipeline = {{ meshes = layout.meshes, dp_group = layout.dp_group,
  micro_batches = plan.micro_batches }} }}, apply)
if slapo.dist.rank() == 0 then
  print(("verify: the pipeline's loss and %d gradients match the unscheduled model"):format(report.gradients))
end
sch = make_schedule()
apply(sch)
-- each replica's gradients are its rows' part: dp_group sums them, or ZeRO-1's step does
local pipe = slapo.build(sch, {{ pipeline = {{ meshes = layout.meshes, micro_batches = plan.micro_batches,
  schedule = "1f1b", dp_group = not mine.zero and layout.dp_group or nil }} }})
slapo.manual_seed(100)  -- the whole batch on every rank; each stage's replicas take their rows of it
local ids = slapo.randint(0, vocab, {{ plan.batch, plan.seq }})
pipe:prepare(ids)
local opt = mine.zero and slapo.optim.zero_adamw(pipe:parameters(), {{ lr = plan.lr, weight_decay = 0,
  group = layout.dp_group, average = false }}) or slapo.optim.adamw(pipe:parameters(), {{ lr = plan.lr, weight_decay = 0 }})
{})",
                     plan.model_source, stages, c.micro_batches, plan.work.batch, plan.work.seq, steps,
                     plan.work.dtype, mesh_layouts_source(plan), stages_schedule_source(model),
                     pipeline_steps_source(), fmt::arg("phase", kPhaseSource));
  return out;
}

}  // namespace

std::string layers_path(const ModelShape& model) {
  return model.type == "gpt2" ? "transformer.h" : model.type == "bert" ? "bert.encoder.layer" : "model.layers";
}

std::string Plan::lua_source(int steps) const {
  const Ranked& best = chosen();
  const Candidate& c = best.candidate;
  if (c.pp() > 1) return c.uniform_mesh() ? pipeline_source(*this, steps) : meshes_source(*this, steps);
  std::string schedules = schedules_of(model);
  std::string out = script_header(*this);
  // the knobs' choices and the planner's prediction for each plan that fits
  std::vector<int> tp_choices, micro_choices;
  std::string predictions;
  for (auto& r : ranked) {
    // the knobs span one-stage plans; shard_layer is written for the chosen plan's sequence parallelism
    if (r.candidate.pp() > 1 || (r.candidate.tp > 1 && r.candidate.sequence != c.sequence)) continue;
    if (std::find(tp_choices.begin(), tp_choices.end(), r.candidate.tp) == tp_choices.end())
      tp_choices.push_back(r.candidate.tp);
    if (std::find(micro_choices.begin(), micro_choices.end(), r.candidate.micro_batches) == micro_choices.end())
      micro_choices.push_back(r.candidate.micro_batches);
    if (!r.estimate.fits) continue;
    predictions += fmt::format(
        "  {{ tp = {}, micro_batches = {}, checkpoint = {}, zero = {}, step_s = {:.6g}, peak_gib = {:.3g} }},\n",
        r.candidate.tp, r.candidate.micro_batches, r.candidate.checkpoint ? "1.0" : "0.0",
        r.candidate.zero ? "true" : "false", r.estimate.step_s, to_gib(r.estimate.peak_bytes));
  }
  std::sort(tp_choices.begin(), tp_choices.end());
  std::sort(micro_choices.begin(), micro_choices.end());
  out += fmt::format(R"(
local plan = {{
  model = {},  -- a preset name, a Hugging Face directory or a table of config fields
  tp = {},           -- tensor parallel ranks (Megatron layout from slapo.schedules.{})
  dp = {},           -- data parallel replicas
  checkpoint = {},  -- fraction of layers whose activations are recomputed in backward
  zero = {},     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  micro_batches = {},  -- each replica's batch in this many parts, their gradients accumulated
  sequence = {},  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = {}, seq = {}, steps = {}, lr = 1e-4,
  dtype = "{}",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
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
plan.micro_batches = knob("micro_batches", {{ {} }}, plan.micro_batches)
local micro_batch = math.floor(plan.batch / plan.dp / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * plan.dp * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))
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
{}
{phase}
-- the schedule is checked against the unscheduled model (outputs and gradients) before training
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, {{ micro_batch, plan.seq }})
phase("checking the schedule against the unscheduled model: outputs and gradients")
local report = slapo.verify(sch, {{ example }}, {{}}, function(s)
  for _, note in ipairs(require("slapo.schedules.{}").schedule(s, {{ checkpoint = plan.checkpoint,
    layer = shard_layer }})) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  local layers = s["{}"]:children()
  sequence_parallel(layers, 1, #layers)
end)
if slapo.dist.rank() == 0 then
  print(("verify: %d output(s) and %d gradients match the unscheduled model"):format(report.outputs, report.gradients))
end
local built = slapo.build(sch)
collectgarbage()  -- the verified copies go before memory is measured
-- tensor memory per rank: the weights, and the most the steps held on top (gradients, AdamW, activations)
phase(("training %d steps"):format(plan.steps))
local peak_mib, result = slapo.peak_tensor_mib(slapo.train, {{
  model = built, layout = layout, optimizer = plan.zero and "zero_adamw" or "adamw",
  data = {{ vocab = vocab, batch = micro_batch, seq = plan.seq }}, grad_accum = plan.micro_batches,
  steps = plan.steps, lr = plan.lr, autocast = plan.dtype == "bfloat16" and "bf16" or nil,
}})
local fullest = math.max(unpack(slapo.dist.all_gather(slapo.tensor({{ built:num_params() * 4 / 2 ^ 20 + peak_mib }})):tolist()))
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f, %.4f s/step, %.0f MiB of tensors on the fullest rank"):format(plan.steps,
    result.final_loss, result.step_s or 0, fullest))
end
)",
                     model_source, c.tp, schedules, c.dp, c.checkpoint ? "1.0" : "0.0", c.zero ? "true" : "false",
                     c.micro_batches, c.sequence ? "true" : "false", work.batch, work.seq, steps, work.dtype, cluster.devices(), fmt::join(tp_choices, ", "),
                     fmt::join(micro_choices, ", "), predictions, shard_layer_source(*this), schedules, layers_path(model),
                     fmt::arg("phase", kPhaseSource));
  return out;
}

}  // namespace slapo::plan
