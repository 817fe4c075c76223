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
local M = {}

--- True for a slapo.Pipeline.
function M.is_pipeline(value)
  return (getmetatable(value) or {}).__name == "slapo.Pipeline"
end

local function ranks_text(group)
  return group and "{" .. table.concat(group:ranks(), ", ") .. "}" or "none"
end

--- Refuses what train cannot do with a pipeline yet, and a pipeline whose ranks are not the layout's.
--- `opts`: train's checked options.
function M.check(pipe, opts)
  local function refuse(what, instead)
    error(("train: %s with a pipeline: %s"):format(what, instead), 0)
  end
  if pipe.on_meshes then
    refuse("stage meshes (pipeline.meshes)", "their stages' ranks differ in number, which no one layout describes; "
      .. "train them with a loop of pipe:step as the planner's scripts do")
  end
  if opts.grad_accum > 1 then
    refuse(("grad_accum = %d"):format(opts.grad_accum), ("a pipeline accumulates over its micro-batches already: "
      .. "give a batch %d times larger with slapo.build(sch, {pipeline = {micro_batches = ...}})"):format(
      opts.grad_accum))
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
  local layout = opts.layout
  if not layout then
    if pipe.dp_group and pipe.dp_group:size() > 1 then
      refuse(("data parallelism over %s without a layout"):format(ranks_text(pipe.dp_group)), "give layout = "
        .. "slapo.parallel.layout{pp = ...}, whose dp_group the pipeline's is, so the loss is the global batch's "
        .. "and each replica reads rows of its own")
    end
    if opts.optimizer == "zero_adamw" then
      refuse("zero_adamw without a layout", "ZeRO shards over the data-parallel replicas: give layout = "
        .. "slapo.parallel.layout{pp = ...}")
    end
    return
  end
  if layout.meshes then
    refuse("a layout of stage meshes", "train them with a loop of pipe:step as the planner's scripts do")
  end
  local want, got = "{" .. table.concat(layout.pp_ranks, ", ") .. "}", ranks_text(pipe.group)
  if got ~= want then
    error(("train: the pipeline runs on ranks %s, but the layout's pp group is %s (%s): build it with "
      .. "slapo.build(sch, {pipeline = {group = layout.pp_group}})"):format(got, want, tostring(layout)), 0)
  end
  if layout.dp > 1 then
    local dp_want = "{" .. table.concat(layout.dp_ranks, ", ") .. "}"
    if ranks_text(pipe.dp_group) ~= dp_want then
      local averages = pipe.dp_group and "averages its gradients over the replicas " .. ranks_text(pipe.dp_group)
        or "averages its gradients over no replicas (no pipeline.dp_group)"
      error(("train: the pipeline %s, but the layout's dp group is %s: build it with slapo.build(sch, {pipeline = "
        .. "{group = layout.pp_group, dp_group = layout.dp_group}}), which averages them during the last "
        .. "micro-batch's backward"):format(averages, dp_want), 0)
    end
  end
end

-- fn()'s result, or train's error: a model that takes no position_ids named, else `what` failed.
local function run(pipe, ids, positions, what, fn)
  local ok, result = pcall(fn)
  if not ok and positions and tostring(result):find("unknown keyword 'position_ids'", 1, true) then
    error(("train: data.documents = \"separate\" hands the model position_ids, and %s takes none (LLaMA, Qwen2 "
      .. "and Mistral do); use documents = \"joined\" with it"):format(pipe.module:type()), 0)
  end
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
