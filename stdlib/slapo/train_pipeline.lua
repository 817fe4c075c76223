--- slapo.train of a pipeline (what slapo.build returns for a schedule with cut stages): each step is
--- one pipe:step over the batch, which the pipeline cuts into its micro-batches, runs through its
--- stages and averages over its data-parallel replicas (pipeline.dp_group). What train does around
--- it is the same as for a module: the learning-rate schedule, clipping (the whole model's norm,
--- added up over the stages), the metrics line and its FLOPs (the pipeline's mean over its ranks),
--- training checkpoints (each rank writes its stages' state; slapo.checkpoint).
---
--- Example usage (4 ranks, 2 stages x 2 replicas):
---   local layout = slapo.parallel.layout{ pp = 2 }
---   local sch = slapo.create_schedule(model)
---   slapo.parallel.cut_stages(sch["model.layers"]:children(), 2)   -- or cut_pipeline_stage by hand
---   local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, dp_group = layout.dp_group } })
---   slapo.train{ model = pipe, layout = layout, data = { tokens = "corpus.tokens", batch = 8, seq = 512 },
---     steps = 100, clip = 1.0 }
--- Stages on meshes of their own (slapo.parallel.stage_layout) train the same way: every rank is
--- given the whole batch, and each stage's replicas take their rows of every micro-batch.
local M = {}

local util = require("slapo.util")

M.is_pipeline = util.is_pipeline

-- A group's ranks as "{0, 1}"; "none" for no group or one of a single rank.
local function ranks_text(group)
  return group and group:size() > 1 and util.ranks_text(group:ranks()) or "none"
end

-- The layout's checks: the pipeline's group its pp group, and its gradients averaged over the
-- layout's replicas (by the pipeline's dp_group, or zero_adamw's step), its experts over the
-- replicas holding the same ones.
local function check_layout(pipe, opts, layout)
  local want, got = util.ranks_text(layout.pp_ranks), util.ranks_text(pipe.group and pipe.group:ranks() or {})
  if got ~= want then
    error(("train: the pipeline runs on ranks %s, but the layout's pp group is %s (%s): build it with "
      .. "slapo.build(sch, {pipeline = {group = layout.pp_group}})"):format(got, want, tostring(layout)), 0)
  end
  local dp_want = layout.dp > 1 and util.ranks_text(layout.dp_ranks) or "none"
  local dp_got = ranks_text(pipe.dp_group)
  -- without a dp_group, ZeRO-1 averages the replicas as it reduce-scatters (once, not twice)
  local zero_averages = dp_got == "none" and opts.optimizer == "zero_adamw"
  if dp_got ~= dp_want and not zero_averages then
    error(("train: the pipeline averages its gradients over %s, but the layout's dp group is %s: build it with "
      .. "slapo.build(sch, {pipeline = {group = layout.pp_group, dp_group = layout.dp_group}})%s"):format(
      dp_got == "none" and "no replicas (no pipeline.dp_group)" or "the replicas " .. dp_got, dp_want,
      layout.dp > 1 and ", which averages them during the last micro-batch's backward" or ""), 0)
  end
  if not next(pipe.module:expert_groups()) then return end
  local expert_want = layout.ep > 1 and layout.dp / layout.ep > 1 and util.ranks_text(layout.expert_dp_ranks) or "none"
  local expert_got = pipe.expert_dp_group and ranks_text(pipe.expert_dp_group) or "none"
  if expert_got ~= expert_want then
    error(("train: the pipeline averages its experts over %s, but in the layout the replicas holding this rank's "
      .. "experts are %s: build it with {pipeline = {expert_dp_group = %s}}"):format(expert_got, expert_want,
      expert_want == "none" and "false" or "layout.expert_dp_group"), 0)
  end
end

-- Stage meshes' checks (Alpa's layout, slapo.parallel.stage_layout): the layout the pipeline's, each
-- stage's replicas combined by the pipeline's dp_group or by zero_adamw's step.
local function check_meshes(pipe, opts, refuse)
  local layout = opts.layout
  if not (layout and layout.meshes) then
    refuse("stage meshes (pipeline.meshes) and " .. (layout and "a layout of one mesh" or "no layout"),
      "give layout = slapo.parallel.stage_layout(meshes), the layout the pipeline was built with")
  end
  local function meshes_text(meshes)
    local out = {}
    for _, m in ipairs(meshes) do out[#out + 1] = ("%dx%d"):format(m.tp, m.dp) end
    return table.concat(out, " ")
  end
  if meshes_text(layout.meshes) ~= meshes_text(pipe.meshes) then
    refuse(("the layout's meshes (tp x dp) %s"):format(meshes_text(layout.meshes)), ("the pipeline runs on %s: "
      .. "build it with {pipeline = {meshes = layout.meshes}}"):format(meshes_text(pipe.meshes)))
  end
  local dp_want = layout.dp > 1 and util.ranks_text(layout.dp_ranks) or "none"
  local dp_got = ranks_text(pipe.dp_group)
  if dp_got ~= dp_want and not (dp_got == "none" and opts.optimizer == "zero_adamw") then
    error(("train: this rank's pipeline stage runs on the replicas %s, and %s: build the pipeline with {pipeline = "
      .. "{meshes = layout.meshes, dp_group = layout.dp_group}}, or train this stage with optimizer = \"zero_adamw\"")
      :format(dp_want, dp_got == "none" and "nothing combines their gradients"
        or "the pipeline combines its gradients over " .. dp_got), 0)
  end
  if next(pipe.module:expert_groups()) then
    refuse("experts spread by shard_experts (" .. next(pipe.module:expert_groups()) .. ") on stage meshes",
      "spread them in a pipeline on one layout, slapo.parallel.layout{pp =, ep =}")
  end
end

--- Refuses what train cannot do with a pipeline yet, and a pipeline whose ranks are not the layout's.
--- `opts`: train's checked options.
function M.check(pipe, opts)
  local function refuse(what, instead)
    error(("train: %s with a pipeline: %s"):format(what, instead), 0)
  end
  if opts.grad_accum > 1 then
    refuse(("grad_accum = %d"):format(opts.grad_accum), ("a pipeline accumulates over its micro-batches already: "
      .. "multiply data.batch and slapo.build's pipeline.micro_batches by %d instead"):format(opts.grad_accum))
  end
  if opts.schedule_file then
    refuse("schedule_file", "hot swapping rebuilds a module; schedule the pipeline once")
  end
  if opts.masked_lm or opts.span_corruption then
    refuse(opts.masked_lm and "masked_lm" or "span_corruption", "a pipeline's stages end in its own loss "
      .. "(the causal-LM loss, or pipeline.loss at slapo.build); train BERT and T5 objectives on a module")
  end
  if opts.autocast == "fp16" or opts.autocast == "float16" then
    refuse("autocast = \"" .. opts.autocast .. "\"", "float16 scales the loss before backward, and a pipeline runs "
      .. "its own backward; use autocast = \"bf16\", whose range needs no scaling")
  end
  if opts.optimizer == "zero_adamw" then
    -- ZeRO takes the stages' parameters as one list: it would shard every replica's own slices or
    -- experts as if they were the same tensors
    local block = next(pipe.module:expert_groups())
    if block then
      refuse("zero_adamw and experts spread by shard_experts (" .. block .. ")", "ZeRO would average different "
        .. "experts together; use optimizer = \"adamw\"")
    end
    local sliced = pipe.module:fully_sharded_parameters()[1]
    if sliced then
      refuse("zero_adamw and fully_shard (" .. sliced .. ")", "its AdamW state is already 1/N of each parameter; "
        .. "use optimizer = \"adamw\"")
    end
  end
  if pipe.on_meshes or (opts.layout and opts.layout.meshes) then
    if not pipe.on_meshes then
      refuse("a layout of stage meshes", "build the pipeline with {pipeline = {meshes = layout.meshes}}")
    end
    return check_meshes(pipe, opts, refuse)
  end
  if opts.layout then
    return check_layout(pipe, opts, opts.layout)
  end
  if ranks_text(pipe.dp_group) ~= "none" then
    refuse(("data parallelism over %s without a layout"):format(ranks_text(pipe.dp_group)), "give layout = "
      .. "slapo.parallel.layout{pp = ...}, whose dp_group the pipeline's is, so the loss is the global batch's "
      .. "and each replica reads rows of its own")
  end
  if opts.optimizer == "zero_adamw" then
    refuse("zero_adamw without a layout", "ZeRO shards over the data-parallel replicas: give layout = "
      .. "slapo.parallel.layout{pp = ...}")
  end
end

--- Whether each replica of this rank's stage trains its own rows: on one layout, so the loss and
--- gradients are that replica's mean, averaged over the replicas; on stage meshes every rank is
--- given the whole batch, and a stage's replicas split each micro-batch, their gradients parts of
--- the batch's mean that add up.
function M.replicas_draw_own_rows(pipe)
  return not pipe.on_meshes
end

--- Makes every replica of this rank's stage hold the stage's whole gradient before clipping reads
--- it, where zero_adamw (a pipeline without a dp_group) would combine them only in its step:
--- averaged on one layout, added up on stage meshes (zero_adamw then averages the equal sums).
function M.combine_before_clipping(pipe, opts)
  if not (opts.clip > 0 and opts.optimizer == "zero_adamw" and opts.layout and opts.layout.dp > 1
      and ranks_text(pipe.dp_group) == "none") then
    return
  end
  if not pipe.on_meshes then return opts.layout:all_reduce_grads(pipe) end
  for _, p in ipairs(pipe:parameters()) do
    if p.grad then slapo.dist.all_reduce(p.grad, opts.layout.dp_group) end
  end
end

--- zero_adamw's `average` for this pipeline: its replicas' gradients averaged where each holds a
--- mean or the same sum (one layout; stage meshes whose dp_group, or train before clipping, added
--- them up), or added up (stage meshes' parts of the batch's mean).
function M.zero_averages(pipe, opts)
  return not pipe.on_meshes or opts.clip > 0 or ranks_text(pipe.dp_group) ~= "none"
end

--- Raises train's error for a model given packed documents' position_ids that takes none (`err`:
--- the model's error); returns otherwise.
function M.refuse_positions(err, model)
  if tostring(err):find("unknown keyword 'position_ids'", 1, true) then
    error(("train: data.documents = \"separate\" hands the model position_ids, and %s takes none (LLaMA, Qwen2 "
      .. "and Mistral do); use documents = \"joined\" with it"):format(model:type()), 0)
  end
end

-- fn()'s result, or train's error: a model that takes no position_ids named, else `what` failed.
local function run(pipe, ids, positions, what, fn)
  local ok, result = pcall(fn)
  if not ok and positions then M.refuse_positions(result, pipe.module) end
  if not ok then
    error(("train: %s the batch (token ids of shape [%s]): %s"):format(what, table.concat(ids:size(), ", "),
      tostring(result)), 0)
  end
  return result
end

--- Traces the pipeline for batches like `ids` (and the documents' `positions`, or nil), so its
--- stages' parameters are known before the optimizer is made.
function M.prepare(pipe, ids, positions)
  run(pipe, ids, positions, "the pipeline could not trace its stages for", function()
    pipe:prepare(ids, { position_ids = positions })
  end)
end

--- The step's loss on every rank (the batch's mean over its trained tokens), its gradients
--- accumulated in this rank's stages. `labels` and `positions`: packed documents kept apart, or nil.
function M.step(pipe, ids, opts, step, labels, positions)
  local batch = { labels = labels or ids, position_ids = positions }
  return run(pipe, ids, positions, ("step %d: the pipeline failed on"):format(step), function()
    if opts.autocast then
      return slapo.autocast(opts.autocast, function() return pipe:step(ids, batch) end)
    end
    return pipe:step(ids, batch)
  end)
end

return M
