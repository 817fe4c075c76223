--- The planner's record (slapo.plan's `record`, what `slapo-lua plan --out` writes from) as the Lua
--- schedule script a person reads, edits and runs: the prediction and the alternatives in
--- comments, a `plan` table to edit, the reference schedule applied and verified, then training.
--- One stage: tp x dp with knobs for the tuner; several: a 1F1B pipeline with each stage's layers
--- and checkpointing spelled out, on one rank layout or on meshes of their own.
---
---   local script = require("slapo.plan_script").write(slapo.plan("gpt2", {cluster = "1x8:h100"}).record)
local layer_layout = require("slapo.layer_layout")

local M = {}

-- The reference schedule (stdlib/slapo/schedules/<family>.lua) a model family's plan applies.
local function schedules_of(model)
  local own = { gpt2 = true, bert = true, roberta = true, gpt_neo = true, opt = true, albert = true, t5 = true,
    mixtral = true }
  return own[model.type] and model.type or "llama"  -- Qwen2 and Mistral use LLaMA's
end

-- The layer lists that schedule lays out, as a Lua list literal: T5's two stacks, else one.
local function stacks_of(model)
  local schedule = require("slapo.schedules." .. schedules_of(model))
  local quoted = {}
  for i, path in ipairs(schedule.stacks or { schedule.layers }) do quoted[i] = ('"%s"'):format(path) end
  return "{ " .. table.concat(quoted, ", ") .. " }"
end

-- The example the schedule is verified on: T5's decoder takes its inputs beside the encoder's.
local function example_args(model)
  return model.type == "t5" and "{ example, { decoder_input_ids = example } }" or "{ example }"
end

-- Where that schedule keeps the layer list.
local function layers_path(model)
  return require("slapo.schedules." .. schedules_of(model)).layers
end

--- `template` with each ${name} replaced by values[name] (a string or a number); a name without a
--- value is an error, so a template and its values cannot drift apart silently.
local function fill(template, values)
  return (template:gsub("%${([%w_]+)}", function(name)
    local value = values[name]
    if value == nil then error("plan_script: the template's ${" .. name .. "} has no value", 2) end
    return tostring(value)
  end))
end

-- A Lua literal for a config value (a JSON value as Lua holds it): keys in order, so the same
-- config always reads the same.
local function quote(s)
  local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
  return '"' .. s:gsub('[%c"\\]', function(c) return escapes[c] or ("\\%03d"):format(c:byte()) end) .. '"'
end
local function literal(value)
  local kind = type(value)
  if kind == "string" then return quote(value) end
  if kind == "boolean" then return tostring(value) end
  if kind == "number" then
    if value == math.floor(value) and math.abs(value) < 1e15 then return ("%d"):format(value) end
    for digits = 15, 17 do  -- the shortest form that reads back as the same number
      local text = ("%." .. digits .. "g"):format(value)
      if tonumber(text) == value then return text end
    end
  end
  local items, keys = {}, {}
  for key in pairs(value) do keys[#keys + 1] = key end
  local array = #keys == #value
  if array then
    for i = 1, #value do items[i] = literal(value[i]) end
  else
    table.sort(keys)
    for i, key in ipairs(keys) do items[i] = ("[%s] = %s"):format(quote(key), literal(value[key])) end
  end
  return "{ " .. table.concat(items, ", ") .. " }"
end

local function bool(value) return value and "true" or "false" end

-- The script's first lines: what was planned, how to run it, and the plans considered.
local function header(record)
  local cluster, work = record.cluster, record.work
  local out = {
    ("-- slapo-lua plan: %s on %d x %d %s, batch %d x seq %d%s\n"):format(record.model.name, cluster.nodes,
      cluster.per_node, cluster.device, work.batch, work.seq, (work.documents or 0) > 0
        and (", priced for packed documents of %d tokens (these steps train whole rows)"):format(work.documents)
        or ""),
    ("-- Run it: slapo-lua run --nproc %d plan.lua   (edit the plan table and run again)\n"):format(cluster.devices),
    "--\n-- Predicted (step seconds, GiB per rank), the best plans considered:\n",
  }
  local shown = math.min(#record.ranked, 20)
  -- the name column as wide as the longest name listed
  local width = 52
  for i = 1, shown do width = math.max(width, #record.ranked[i].name) end
  for _, r in ipairs(record.unrestricted) do width = math.max(width, #r.name) end
  if record.unpinned then width = math.max(width, #record.unpinned.name) end
  local function line(r)
    -- padded by hand: string.format's widths stop at 99, and a 96-stage pipeline's name is longer
    local name = r.name .. (" "):rep(width - #r.name)
    out[#out + 1] = ("--   %s %9.4f s %7.2f GiB  %s\n"):format(name, r.step_s, r.peak_gib, r.verdict)
  end
  for i = 1, shown do line(record.ranked[i]) end
  if #record.ranked > shown then out[#out + 1] = ("--   ... and %d more\n"):format(#record.ranked - shown) end
  for _, r in ipairs(record.unrestricted) do line(r) end
  if record.unpinned then
    out[#out + 1] = ("-- Pinned (kept from the schedule or pin = {...}): %s; the planner's choice without them:\n")
      :format(record.pins)
    line(record.unpinned)
  end
  return table.concat(out)
end

-- `phase(text)`: the script says what it does now, so a long check is not silence.
local phase_source = [[
-- what the script is doing now, from rank 0 on stderr (checking a large model takes a while)
local function phase(text)
  if slapo.dist.rank() == 0 then io.stderr:write("plan: ", text, "\n") end
end
]]

-- `local function shard_layer(layer) ... end` from the intra-op pass, the layout the predictions
-- price; `local shard_layer = nil` (the reference schedule's layout) without it. With sequence
-- parallelism the layout expects its layer's tokens split: the first layer of each stage splits
-- them (`scatter`) and the last gathers them again. `sequence_parallel(s, first, last)` does that
-- to the layers first..last; the script checks that plan.sequence and shard_layer agree.
local function shard_layer_source(record)
  local chosen, note = record.ranked[1], record.layer_layout_note
  local out
  if not record.layer_layout then
    out = ("\n-- each layer's tensor parallelism: the reference schedule's (Megatron's) layout%s\n"
      .. "local shard_layer = nil\n"):format(note == "" and "" or "; " .. note)
  else
    out = ("\n-- Each layer's tensor parallelism, from the intra-op pass: %s.\n"
      .. "-- The predictions above price this layout. Edit a line (keep a projection whole, say) and run again;\n"
      .. "-- `local shard_layer = nil` in its place runs the reference schedule's (Megatron's) layout.\n"
      .. "local function shard_layer(layer)\n%send\n"):format(note, layer_layout.calls(record.layer_layout, "layer"))
  end
  return out .. fill([[
local shard_layer_splits_tokens = ${splits}  -- it was written for sequence parallelism
if plan.tp > 1 and plan.sequence ~= (shard_layer ~= nil and shard_layer_splits_tokens) then
  error(("plan.sequence = %s, but the layers' layout (shard_layer) %s the tokens: plan again with the other, or set "
    .. "sequence = %s"):format(tostring(plan.sequence), plan.sequence and "keeps whole" or "splits",
    tostring(not plan.sequence)))
end
-- sequence parallelism: layers first..last take their tokens split over the tp ranks, and hand them on whole
local function sequence_parallel(layers, first, last)
  if not plan.sequence or plan.tp < 2 then return end
  layers[first]:sync("fwd_pre", "scatter", { axis = 1 })
  layers[last]:sync("fwd_post", "all_gather", { axis = 1 })
end
]], { splits = bool(chosen.sequence and record.layer_layout ~= nil) })
end

-- The line bench/plan_calibration reads: the steps, the last loss, the median step time and the
-- fullest rank's tensor memory in MiB (`held`, an expression of each rank's).
local function report_source(held, loss, step_s)
  return fill([[
local held = slapo.dist.all_gather(slapo.tensor({ ${held} })):tolist()
local fullest = math.max(unpack(held))
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f, %.4f s/step, %.0f MiB of tensors on the fullest rank"):format(plan.steps,
    ${loss}, ${step_s}, fullest))
end
]], { held = held, loss = loss, step_s = step_s })
end

-- A pipeline trained by slapo.train: `plan.steps` steps of `pipe` on `rows` of synthetic data a
-- replica (stage meshes: the whole batch on every rank), ZeRO-1 where `zero` (an expression) is
-- true, the memory measured around them.
local function pipeline_train_source(rows, zero)
  return fill([[
collectgarbage()  -- the verified copies go before memory is measured
-- tensor memory per rank: the stage's weights, and the most the steps held on top (gradients, the
-- optimizer's state, activations). The rows are random; to train on text, give
-- data = { tokens = "corpus.tokens", batch = plan.batch, seq = plan.seq } (slapo-lua tokenize)
phase(("training %d steps"):format(plan.steps))
local peak_mib, result = slapo.peak_tensor_mib(slapo.train, {
  model = pipe, layout = layout, optimizer = ${zero} and "zero_adamw" or "adamw",
  data = { vocab = vocab, batch = ${rows}, seq = plan.seq },
  steps = plan.steps, lr = plan.lr, autocast = plan.dtype == "bfloat16" and "bf16" or nil,
})
]], { rows = rows, zero = zero }) .. report_source("pipe:num_params() * 4 / 2 ^ 20 + peak_mib", "result.final_loss",
    "result.step_s or 0")
end

-- Both pipeline forms' model and schedule: make_schedule() over this rank's tp group, and apply(s):
-- the reference schedule with `shard_layer` (and `options`, more of its fields), each stage's
-- checkpointing and sequence parallelism, and a cut after each stage.
local function stages_schedule_source(model, fully_shard_layer, options, prelude)
  return fill([[
local function make_schedule()
  slapo.manual_seed(0)
  local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
    or slapo.models.build(plan.model)
  return slapo.create_schedule(model, { group = layout.tp_group }), slapo.models.config(model).vocab_size
end

-- the tensor parallelism (over this rank's tp group), then each stage's checkpointing and the cuts
local function apply(s)
${prelude}  for _, note in ipairs(require("slapo.schedules.${schedules}").schedule(s, { checkpoint = 0, layer = shard_layer${options} })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  local layers, placed = s["${layers}"]:children(), 0
  for i, stage in ipairs(plan.stages) do
    for l = placed + 1, placed + stage.layers do
      if stage.checkpoint then layers[l]:checkpoint() end
${fully_shard_layer}    end
    sequence_parallel(layers, placed + 1, placed + stage.layers)
    placed = placed + stage.layers
    if i < #plan.stages then layers[placed]:cut_pipeline_stage() end
  end
  assert(placed == #layers, ("plan.stages hold %d layers; the model has %d"):format(placed, #layers))
end
]], { schedules = schedules_of(model), layers = layers_path(model), fully_shard_layer = fully_shard_layer,
    options = options or "", prelude = prelude or "" })
end

-- Both pipeline forms' check and build: the schedule verified on `rows` of an example (loss and
-- gradients), then built again and cut into `pipe`. `verify` and `build` are the pipeline options
-- of each, `note` a comment before the build.
local function verify_and_build_source(rows, verify, build, note)
  return fill([[
local sch, vocab = make_schedule()
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, { ${rows}, plan.seq })
phase("checking the pipeline against the unscheduled model: loss and gradients")
local report = slapo.verify(sch, { example }, { pipeline = { ${verify} } }, apply)
if slapo.dist.rank() == 0 then
  print(("verify: the pipeline's loss and %d gradients match the unscheduled model"):format(report.gradients))
end
sch = make_schedule()
apply(sch)
${note}local pipe = slapo.build(sch, { pipeline = { ${build} } })
]], { rows = rows, verify = verify, build = build, note = note })
end

-- A pipeline on one rank layout: every stage on tp x dp ranks.
local function pipeline_source(record)
  local chosen = record.ranked[1]
  -- a mixture of experts: its experts spread over ep replicas in every stage (shard_experts), their
  -- gradients averaged over the replicas holding the same experts (pipeline.expert_dp_group)
  local experts = (record.model.experts or 0) > 0
  local moe = { field = "", layout = "", schedule = "", build = "", check = "" }
  if experts then
    moe = {
      field = "  ep = " .. chosen.ep .. ",           -- expert parallelism: each layer's experts spread over ep "
        .. "replicas of its stage (shard_experts)\n",
      layout = ", ep = plan.ep",
      schedule = ",\n    ep_group = plan.ep > 1 and layout.ep_group or nil",
      build = ",\n  expert_dp_group = plan.ep > 1 and layout.expert_dp_group or nil",
      check = 'assert(plan.ep == 1 or not (plan.zero or plan.fully_shard), "plan: ep > 1 in pipeline stages runs plain "\n'
        .. '  .. "replicas (zero and fully_shard beside spread experts in stages are untested)")\n',
    }
  end
  -- context parallelism: each sequence split over cp replicas of every stage (context_parallel before
  -- the family's schedule and the cuts); a cp group's ranks take the same rows, and the pipeline's
  -- dp_group, which holds it, averages their parts of the gradients
  local cp = { field = "", layout = "", replicas = "plan.dp", schedule = "",
    verify = "", check = "" }
  if chosen.cp > 1 then
    cp = {
      field = "  cp = " .. chosen.cp .. ",           -- context parallelism: each sequence split over cp replicas "
        .. "of its stage\n"
        .. ('  cp_method = "%s",  -- "ring" (ring attention), or "all_to_all" (Ulysses: a rank\'s heads over cp)\n')
          :format(chosen.cp_method),
      layout = ", cp = plan.cp",
      replicas = "(plan.dp / plan.cp)",
      schedule = "  if plan.cp > 1 then s:context_parallel({ group = layout.cp_group, method = plan.cp_method }) end\n",
      verify = ", dp_group = layout.dp_group",
      check = 'assert(plan.cp == 1 or not (plan.zero or plan.fully_shard or plan.sequence), "plan: cp > 1 in pipeline "\n'
        .. '  .. "stages runs beside plain replicas (the pipeline\'s dp_group averages the cp ranks\' parts of the "\n'
        .. '  .. "gradients), without sequence parallelism")\n',
    }
  end
  local out, stages, first = { header(record),
    "--\n-- The chosen pipeline, stage by stage (micro-batch seconds, GiB per rank):\n" }, {}, 0
  for s, stage in ipairs(chosen.stages) do
    out[#out + 1] = ("--   stage %d: layers %d..%d%s, %.4f s, %.2f GiB\n"):format(s - 1, first,
      first + stage.layers - 1, stage.checkpoint and " (checkpointed)" or "", stage.time_s, stage.peak_gib)
    stages[#stages + 1] = ("    { layers = %d, checkpoint = %s },\n"):format(stage.layers, bool(stage.checkpoint))
    first = first + stage.layers
  end
  out[#out + 1] = fill([[

local plan = {
  model = ${model},  -- a preset name, a Hugging Face directory or a table of config fields
  tp = ${tp},           -- tensor parallel ranks in every stage (Megatron layout from slapo.schedules.${schedules})
  dp = ${dp},           -- data parallel replicas of the pipeline
${ep_field}${cp_field}  zero = ${zero},     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = ${fully_shard},  -- ZeRO-3: each layer's weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = ${reshard},  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  stages = {        -- pipeline stages in order: how many layers each holds, and whether they are recomputed
${stages}  },
  micro_batches = ${micro_batches},  -- 1F1B: each replica's batch is cut into this many
  sequence = ${sequence},  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = ${batch}, seq = ${seq}, steps = ${steps}, lr = 1e-4,
  dtype = "${dtype}",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

local pp = #plan.stages
assert(not (plan.zero and plan.fully_shard), "plan: zero (ZeRO-1) and fully_shard (ZeRO-3) are one or the other")
${ep_check}${cp_check}assert(slapo.dist.world_size() == plan.tp * plan.dp * pp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp * pp, plan.tp * plan.dp * pp))
local parallel = require("slapo.parallel")
local layout = parallel.layout({ tp = plan.tp, pp = pp${ep_layout}${cp_layout} })
local replica_batch = math.floor(plan.batch / ${replicas})
assert(replica_batch * ${replicas} == plan.batch and replica_batch % plan.micro_batches == 0,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, ${replicas}, plan.micro_batches))

${shard_layer}
${phase}
${schedule}
-- the pipeline is checked against the unscheduled model (loss and gradients) before training;
-- a verified pipeline keeps only its stage's weights, so training builds the model again
phase(("building the model on %d ranks, %d stages"):format(slapo.dist.world_size(), pp))
${verify_and_build}${train}]], {
    model = literal(record.model.source), tp = chosen.tp, schedules = schedules_of(record.model), dp = chosen.dp,
    zero = bool(chosen.zero), fully_shard = bool(chosen.fully_sharded), reshard = bool(not chosen.keep_gathered),
    stages = table.concat(stages), micro_batches = chosen.micro_batches,
    sequence = bool(chosen.sequence), batch = record.work.batch, seq = record.work.seq, steps = record.steps,
    dtype = record.work.dtype, shard_layer = shard_layer_source(record), phase = phase_source,
    schedule = stages_schedule_source(record.model, "      -- fully sharded over the replicas of its stage\n"
      .. "      if plan.fully_shard and plan.dp > 1 then\n"
      .. "        layers[l]:fully_shard({ group = layout.dp_group, reshard_after_forward = plan.reshard_after_forward })\n"
      .. "      end\n", moe.schedule, cp.schedule),
    train = pipeline_train_source("replica_batch", "plan.zero"), ep_field = moe.field, ep_layout = moe.layout, ep_check = moe.check,
    cp_field = cp.field, cp_layout = cp.layout, cp_check = cp.check, replicas = cp.replicas,
    verify_and_build = verify_and_build_source("replica_batch", "group = layout.pp_group" .. cp.verify
      .. ",\n  micro_batches = plan.micro_batches", "group = layout.pp_group, micro_batches = plan.micro_batches,\n  schedule = "
      .. '"1f1b", dp_group = not plan.zero and layout.dp_group or nil' .. moe.build, ""),
  })
  return table.concat(out)
end

-- Each stage mesh's layer layout from the intra-op pass, by "TxD" (", sequence" when it splits the
-- tokens between projections); a mesh without one takes the reference schedule's layout.
local function mesh_layouts_source(record)
  local out = { "\n-- Each stage mesh's layer layout (tensor parallelism), by tp x dp" }
  local note = record.layer_layout_note
  if #record.mesh_layouts == 0 then
    out[#out + 1] = (": the reference schedule's (Megatron's)%s.\nlocal shard_layers = {}\n"):format(
      note == "" and "" or "; " .. note)
    return table.concat(out)
  end
  out[#out + 1] = ", from the intra-op pass; the predictions price these.\n-- A mesh missing here runs the reference "
    .. "schedule's (Megatron's) layout.\n"
  for _, m in ipairs(record.mesh_layouts) do out[#out + 1] = ("--   %dx%d: %s\n"):format(m.tp, m.dp, m.note) end
  out[#out + 1] = "local shard_layers = {\n"
  for _, m in ipairs(record.mesh_layouts) do
    local body = layer_layout.calls(m.layout, "layer"):gsub("([^\n]*\n)", "  %1")  -- indented once more, inside the table
    out[#out + 1] = ('  ["%dx%d%s"] = function(layer)\n%s  end,\n'):format(m.tp, m.dp, m.sequence and ", sequence" or "",
      body)
  end
  out[#out + 1] = "}\n"
  return table.concat(out)
end

-- Stages on meshes of their own (Alpa's submeshes): slapo.parallel.stage_layout gives each stage
-- its ranks, and each rank applies its own stage's tensor parallelism.
local function meshes_source(record)
  local chosen = record.ranked[1]
  local out, stages, first, rank = { header(record), "--\n-- The chosen pipeline, stage by stage, each on ranks of "
    .. "its own (micro-batch seconds, GiB per rank):\n" }, {}, 0, 0
  for s, stage in ipairs(chosen.stages) do
    out[#out + 1] = ("--   stage %d: layers %d..%d on tp %d x dp %d (ranks %d..%d)%s%s%s, %.4f s, %.2f GiB\n"):format(
      s - 1, first, first + stage.layers - 1, stage.tp, stage.dp, rank, rank + stage.tp * stage.dp - 1,
      stage.checkpoint and ", checkpointed" or "", stage.zero and ", ZeRO-1" or "",
      stage.sequence and ", sequence parallel" or "", stage.time_s, stage.peak_gib)
    stages[#stages + 1] = ("    { layers = %d, tp = %d, dp = %d, checkpoint = %s, zero = %s, sequence = %s },\n"):format(
      stage.layers, stage.tp, stage.dp, bool(stage.checkpoint), bool(stage.zero), bool(stage.sequence))
    first = first + stage.layers
    rank = rank + stage.tp * stage.dp
  end
  out[#out + 1] = fill([[

local plan = {
  model = ${model},  -- a preset name, a Hugging Face directory or a table of config fields
  -- pipeline stages in order, each on ranks of its own: how many layers it holds, its mesh (tp ranks
  -- x dp replicas), whether its layers are recomputed, ZeRO-1 over its replicas, sequence parallelism
  stages = {
${stages}  },
  micro_batches = ${micro_batches},  -- 1F1B: the batch is cut into this many; each stage's replicas split every one
  batch = ${batch}, seq = ${seq}, steps = ${steps}, lr = 1e-4,
  dtype = "${dtype}",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

local meshes, ranks = {}, 0
for i, stage in ipairs(plan.stages) do
  meshes[i] = { tp = stage.tp, dp = stage.dp }
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
${mesh_layouts}local shard_layer = shard_layers[("%dx%d%s"):format(mine.tp, mine.dp, mine.sequence and ", sequence" or "")]
if mine.tp > 1 and mine.sequence and not shard_layer then
  error(("plan: stage %d has sequence = true, but no layer layout splits the tokens on tp %d x dp %d: plan again, or "
    .. "set sequence = false"):format(layout.stage, mine.tp, mine.dp))
end
-- sequence parallelism on this rank's mesh: layers first..last take their tokens split over its tp ranks
local function sequence_parallel(layers, first, last)
  if not mine.sequence or mine.tp < 2 then return end
  layers[first]:sync("fwd_pre", "scatter", { axis = 1 })
  layers[last]:sync("fwd_post", "all_gather", { axis = 1 })
end
${phase}
${schedule}
-- the pipeline is checked against the unscheduled model (loss and gradients) before training, on the
-- fewest rows that every stage's replicas divide; a verified pipeline keeps only its stage's weights,
-- so training builds the model again
${verify_and_build}${train}]], {
    model = literal(record.model.source), stages = table.concat(stages), micro_batches = chosen.micro_batches,
    batch = record.work.batch, seq = record.work.seq, steps = record.steps, dtype = record.work.dtype,
    mesh_layouts = mesh_layouts_source(record), phase = phase_source,
    schedule = stages_schedule_source(record.model, ""),
    train = pipeline_train_source("plan.batch", "mine.zero"),
    verify_and_build = verify_and_build_source("plan.micro_batches * rows", "meshes = layout.meshes, dp_group = "
      .. "layout.dp_group,\n  micro_batches = plan.micro_batches", "meshes = layout.meshes, micro_batches = "
      .. 'plan.micro_batches,\n  schedule = "1f1b", dp_group = not mine.zero and layout.dp_group or nil',
      "-- each replica's gradients are its rows' part: dp_group sums them, or ZeRO-1's step does\n"),
  })
  return table.concat(out)
end

-- One stage: tp x dp, the knobs' choices spanning the one-stage plans, the planner's prediction
-- for each that fits.
local function one_stage_source(record)
  local chosen = record.ranked[1]
  local tp_choices, micro_choices, ep_choices, cp_choices, predictions = {}, {}, {}, {}, {}
  local seen = { tp = {}, micro = {}, ep = {}, cp = {}, cp_method = {} }
  local cp_methods = {}
  local experts = (record.model.experts or 0) > 0  -- a mixture of experts: ep is a knob too
  local context = false  -- long sequences: the plans split them over cp replicas, a knob too
  for _, r in ipairs(record.ranked) do context = context or r.cp > 1 end
  for _, r in ipairs(record.ranked) do
    -- the knobs span one-stage plans; shard_layer is written for the chosen plan's sequence parallelism
    if r.pp == 1 and not (r.tp > 1 and r.sequence ~= chosen.sequence) then
      if not seen.tp[r.tp] then seen.tp[r.tp] = true; tp_choices[#tp_choices + 1] = r.tp end
      if not seen.ep[r.ep] then seen.ep[r.ep] = true; ep_choices[#ep_choices + 1] = r.ep end
      if not seen.cp[r.cp] then seen.cp[r.cp] = true; cp_choices[#cp_choices + 1] = r.cp end
      if r.cp > 1 and not seen.cp_method[r.cp_method] then
        seen.cp_method[r.cp_method] = true
        cp_methods[#cp_methods + 1] = r.cp_method
      end
      if not seen.micro[r.micro_batches] then
        seen.micro[r.micro_batches] = true
        micro_choices[#micro_choices + 1] = r.micro_batches
      end
      if r.fits then
        predictions[#predictions + 1] = ("  { tp = %d,%s micro_batches = %d, checkpoint = %s, zero = %s, fully_shard = %s, "
          .. "reshard_after_forward = %s, step_s = %.6g, peak_gib = %.3g },\n"):format(r.tp,
          experts and (" ep = %d,"):format(r.ep) or context and (" cp = %d, cp_method = %q,"):format(r.cp,
            r.cp > 1 and r.cp_method or chosen.cp_method or "ring") or "", r.micro_batches,
          r.checkpoint == 1 and "1.0" or "0.0", bool(r.zero), bool(r.fully_sharded), bool(not r.keep_gathered), r.step_s,
          r.peak_gib)
      end
    end
  end
  table.sort(tp_choices)
  table.sort(micro_choices)
  table.sort(ep_choices)
  table.sort(cp_choices)
  table.sort(cp_methods, function(a, b) return a == "ring" and b ~= "ring" end)  -- the ring first
  local schedules = schedules_of(record.model)
  -- a mixture of experts' lines: ep in the plan table and as a knob, the layout's ep groups, the
  -- experts spread over them and, fully sharded, each expert over the replicas holding it
  local moe = {
    field = "  ep = " .. chosen.ep .. ",           -- expert parallelism: each layer's experts spread over ep "
      .. "replicas (shard_experts), tokens sent to them and back\n",
    knob = ("plan.ep = knob(\"ep\", { %s }, plan.ep)\n"):format(table.concat(ep_choices, ", ")),
    layout = ", ep = plan.ep",
    schedule = ", ep_group = plan.ep > 1 and layout.ep_group or nil",
    fully_shard_layers = [[
      for _, layer in ipairs(layers) do
        if plan.dp > plan.ep then  -- each expert over the replicas holding it
          for _, expert in ipairs(layer["block_sparse_moe.experts"]:children()) do
            expert:fully_shard({ group = layout.expert_dp_group, reshard_after_forward = plan.reshard_after_forward })
          end
        end
        layer:fully_shard(options)
      end
]],
  }
  if not experts then
    moe = { field = "", knob = "", layout = "", schedule = "",
      fully_shard_layers = "      for _, layer in ipairs(layers) do layer:fully_shard(options) end\n" }
  end
  -- context parallelism's lines: cp in the plan table and as a knob, the layout's cp groups (whose
  -- replicas take the same rows), and the sequences split over them before the family's schedule
  local cp = { field = "", knob = "", layout = "", replicas = "plan.dp", schedule = "" }
  if context then
    cp = {
      field = "  cp = " .. chosen.cp .. ",           -- context parallelism: each sequence split over cp replicas\n"
        .. ('  cp_method = "%s",  -- "ring" (ring attention), or "all_to_all" (Ulysses: a rank\'s heads over cp)\n')
          :format(chosen.cp_method or "ring"),
      -- a knob even with one choice: every prediction names it
      knob = ("plan.cp = knob(\"cp\", { %s }, plan.cp)\n"):format(table.concat(cp_choices, ", "))
        .. ("plan.cp_method = knob(\"cp_method\", { \"%s\" }, plan.cp_method)\n"):format(
          #cp_methods > 0 and table.concat(cp_methods, '", "') or "ring"),
      layout = ", cp = plan.cp",
      replicas = "(plan.dp / plan.cp)",
      schedule = "  if plan.cp > 1 then s:context_parallel({ group = layout.cp_group, method = plan.cp_method }) end\n",
    }
  end
  return header(record) .. fill([[

local plan = {
  model = ${model},  -- a preset name, a Hugging Face directory or a table of config fields
  tp = ${tp},           -- tensor parallel ranks (Megatron layout from slapo.schedules.${schedules})
  dp = ${dp},           -- data parallel replicas
${ep_field}${cp_field}  checkpoint = ${checkpoint},  -- fraction of layers whose activations are recomputed in backward
  zero = ${zero},     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = ${fully_shard},  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = ${reshard},  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  micro_batches = ${micro_batches},  -- each replica's batch in this many parts, their gradients accumulated
  sequence = ${sequence},  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = ${batch}, seq = ${seq}, steps = ${steps}, lr = 1e-4,
  dtype = "${dtype}",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

-- `slapo-lua tune plan.lua --nproc ${devices}` runs the plans above as knobs, the best predicted first
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
plan.tp = knob("tp", { ${tp_choices} }, plan.tp)
plan.dp = math.floor(devices / plan.tp)
plan.checkpoint = knob("checkpoint", { 0.0, 1.0 }, plan.checkpoint)
plan.zero = knob("zero", { false, true }, plan.zero)
plan.fully_shard = knob("fully_shard", { false, true }, plan.fully_shard)
plan.reshard_after_forward = knob("reshard_after_forward", { true, false }, plan.reshard_after_forward)
assert(not (plan.zero and plan.fully_shard), "plan: zero (ZeRO-1) and fully_shard (ZeRO-3) are one or the other")
${ep_knob}${cp_knob}plan.micro_batches = knob("micro_batches", { ${micro_choices} }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / ${replicas} / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * ${replicas} * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, ${replicas}, plan.micro_batches))
slapo.predict({
${predictions}})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({ tp = plan.tp${ep_layout}${cp_layout} })
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local vocab = slapo.models.config(model).vocab_size
${shard_layer}
${phase}
-- the schedule is checked against the unscheduled model (outputs and gradients) before training
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, { micro_batch, plan.seq })
phase("checking the schedule against the unscheduled model: outputs and gradients")
local report = slapo.verify(sch, ${example_args}, {}, function(s)
${cp_schedule}  for _, note in ipairs(require("slapo.schedules.${schedules}").schedule(s, { checkpoint = plan.checkpoint,
    layer = shard_layer${ep_schedule} })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  -- each layer, then the rest at the root (FSDP2's order)
  local options = { group = layout.dp_group, reshard_after_forward = plan.reshard_after_forward }
  for _, list in ipairs(${stacks}) do
    local layers = s[list]:children()
    sequence_parallel(layers, 1, #layers)
    if plan.fully_shard and plan.dp > 1 then
${fully_shard_layers}    end
  end
  if plan.fully_shard and plan.dp > 1 then s:fully_shard(options) end
end)
if slapo.dist.rank() == 0 then
  print(("verify: %d output(s) and %d gradients match the unscheduled model"):format(report.outputs, report.gradients))
end
local built = slapo.build(sch)
collectgarbage()  -- the verified copies go before memory is measured
-- tensor memory per rank: the weights, and the most the steps held on top (gradients, AdamW, activations)
phase(("training %d steps"):format(plan.steps))
local peak_mib, result = slapo.peak_tensor_mib(slapo.train, {
  model = built, layout = layout, optimizer = plan.zero and "zero_adamw" or "adamw",
  data = { vocab = vocab, batch = micro_batch, seq = plan.seq }, grad_accum = plan.micro_batches,
  steps = plan.steps, lr = plan.lr, autocast = plan.dtype == "bfloat16" and "bf16" or nil,
})
${report}]], {
    model = literal(record.model.source), tp = chosen.tp, schedules = schedules, dp = chosen.dp,
    checkpoint = chosen.checkpoint == 1 and "1.0" or "0.0", zero = bool(chosen.zero),
    fully_shard = bool(chosen.fully_sharded), reshard = bool(not chosen.keep_gathered),
    micro_batches = chosen.micro_batches, sequence = bool(chosen.sequence),
    batch = record.work.batch,
    seq = record.work.seq, steps = record.steps, dtype = record.work.dtype, devices = record.cluster.devices,
    tp_choices = table.concat(tp_choices, ", "), micro_choices = table.concat(micro_choices, ", "),
    predictions = table.concat(predictions), shard_layer = shard_layer_source(record), phase = phase_source,
    stacks = stacks_of(record.model), example_args = example_args(record.model),
    ep_field = moe.field, ep_knob = moe.knob, ep_layout = moe.layout, ep_schedule = moe.schedule,
    fully_shard_layers = moe.fully_shard_layers, cp_field = cp.field, cp_knob = cp.knob, cp_layout = cp.layout,
    replicas = cp.replicas, cp_schedule = cp.schedule,
    report = report_source("built:num_params() * 4 / 2 ^ 20 + peak_mib", "result.final_loss", "result.step_s or 0"),
  })
end

--- The script for a plan record: one stage, a pipeline on one rank layout, or stages on meshes of
--- their own, as the chosen plan is.
function M.write(record)
  local chosen = record.ranked[1]
  if chosen.pp == 1 then return one_stage_source(record) end
  return chosen.uniform_mesh and pipeline_source(record) or meshes_source(record)
end

return M
