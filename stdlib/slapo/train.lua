--- slapo.train{...}: a training loop with LR warm-up and decay (transformers' cosine, linear and
--- constant schedules, step for step), gradient accumulation and clipping, a per-step metrics line
--- (loss, tokens/s, TFLOP/s, MFU, memory), a live progress bar on a terminal, and metrics.jsonl for
--- machines.
---
--- Example usage:
---   local result = slapo.train{ model = model, steps = 200, lr = 3e-4, warmup = 20,
---     data = { vocab = 8192, batch = 8, seq = 128 },          -- or a function(step, micro) -> ids,
---                                                             -- or { tokens = "corpus.tokens", batch =, seq =,
---                                                             --   seed = 0, documents = "joined" | "separate" }
---     metrics = "metrics.jsonl" }
--- `model` may be a pipeline (slapo.build of a schedule with cut stages): one pipe:step a step
--- (slapo/train_pipeline.lua).
--- Output (one line per log_every steps):
---   step   10 | loss 6.2143 | lr 3.00e-04 | 12,345 tok/s | 0.41 TFLOP/s | MFU 4.1% | 812 MiB
local M = {}
local util = require("slapo.util")

local defaults = {
  steps = 100, optimizer = "adamw", lr = 3e-4, weight_decay = 0.0, warmup = 0, schedule = "cosine",
  min_lr = 0.0, grad_accum = 1, clip = 0, seed = false, log_every = 1, metrics = false, quiet = false,
  group = false, layout = false, autocast = false, checkpoint_dir = false,
  schedule_file = false, make_model = false, on_step = false, checkpoint_every = 0, resume = true, schedule_log = false,
  masked_lm = false, span_corruption = false,
}

local function check_options(opts)
  if type(opts) ~= "table" then
    error("train: expected a table of options {model = ..., data = ..., steps = ...}", 3)
  end
  if opts.model == nil and not (opts.schedule_file and opts.make_model) then
    error("train: 'model' is required (a module, e.g. slapo.build(sch)), or schedule_file with make_model", 3)
  end
  local model_kind = opts.model ~= nil and (getmetatable(opts.model) or {}).__name
  if opts.model ~= nil and model_kind ~= "slapo.Module" and model_kind ~= "slapo.Pipeline" then
    error(("train: 'model' must be a module or a pipeline%s, got %s"):format(model_kind == "slapo.Schedule"
      and " (a schedule's is sch.mod, or slapo.build(sch))" or "", model_kind or type(opts.model)), 3)
  end
  if opts.data == nil then
    error("train: 'data' is required: a function(step, micro) returning token ids, or {vocab =, batch =, seq =}", 3)
  end
  local out = {}
  for k, v in pairs(defaults) do
    out[k] = v
  end
  for k, v in pairs(opts) do
    if defaults[k] == nil and k ~= "model" and k ~= "data" then
      local names = {}
      for name in pairs(defaults) do
        table.insert(names, name)
      end
      table.sort(names)
      error(("train: unknown option '%s' (options: model, data, %s)"):format(k, table.concat(names, ", ")), 3)
    end
    out[k] = v
  end
  if out.schedule ~= "cosine" and out.schedule ~= "linear" and out.schedule ~= "constant" then
    error(("train: unknown schedule '%s' (choices: cosine, linear, constant)"):format(tostring(out.schedule)), 3)
  end
  if type(out.optimizer) ~= "string" then  -- train builds its optimizer over the model it trains
    error(("train: optimizer is a name (adamw, sgd, zero_adamw) that train builds with lr and weight_decay, got %s")
      :format(util.describe(out.optimizer)), 3)
  end
  if out.optimizer ~= "adamw" and out.optimizer ~= "sgd" and out.optimizer ~= "zero_adamw" then
    error(("train: unknown optimizer '%s' (choices: adamw, sgd, zero_adamw)"):format(tostring(out.optimizer)), 3)
  end
  -- ZeRO's group is the data-parallel one: over a tensor-parallel group it would average different shards
  if out.optimizer == "zero_adamw" and out.group and not out.layout then
    error("train: zero_adamw with a tensor-parallel group needs layout = (ZeRO shards over its dp_group)", 3)
  end
  -- counts and rates: a negative step count or a zero accumulation would run nothing, or divide by 0
  local function integer_at_least(name, low)
    local v = out[name]
    if type(v) ~= "number" or v ~= math.floor(v) or v < low then
      error(("train: %s must be an integer >= %d, got %s"):format(name, low, tostring(v)), 4)
    end
  end
  integer_at_least("steps", 1)
  integer_at_least("grad_accum", 1)
  integer_at_least("log_every", 1)
  integer_at_least("warmup", 0)
  integer_at_least("checkpoint_every", 0)
  for _, name in ipairs({ "lr", "weight_decay", "min_lr", "clip" }) do
    local v = out[name]
    if type(v) ~= "number" or not (v >= 0) or v == math.huge then
      error(("train: %s must be a finite number >= 0, got %s"):format(name,
        type(v) == "string" and ("the string '%s'"):format(v) or tostring(v)), 3)
    end
  end
  if out.min_lr > 0 and out.schedule ~= "cosine" then
    error(("train: min_lr is the floor of the cosine schedule; schedule '%s' takes none (choices: cosine)"):format(
      out.schedule), 3)
  end
  if out.masked_lm and out.span_corruption then
    error("train: masked_lm (BERT's objective) and span_corruption (T5's) are one or the other", 3)
  end
  for _, objective in ipairs({ "masked_lm", "span_corruption" }) do
    if out[objective] then
      local model = util.is_pipeline(opts.model) and opts.model.module or opts.model
      out[objective] = require("slapo." .. objective).check(out[objective], model)
      if type(opts.data) == "table" and opts.data.documents == "separate" then
        error(("train: %s sees whole rows; data.documents = \"separate\" is for causal models (use \"joined\")")
          :format(objective), 3)
      end
    end
  end
  local seed = out.seed
  if seed ~= false and (type(seed) ~= "number" or seed ~= math.floor(seed) or seed < 0) then
    error(("train: seed must be an integer >= 0 or false (leave the random stream as it is), got %s"):format(
      tostring(seed)), 3)
  end
  -- what a pipeline cannot do yet refused before autocast's check, which on a CPU refuses float16 first
  local pipelines = require("slapo.train_pipeline")
  if pipelines.is_pipeline(out.model) then
    pipelines.check(out.model, out)
  end
  -- autocast's own check, at the call rather than blamed on the first batch
  if out.autocast then
    local ok, err = pcall(slapo.autocast, out.autocast, function() end)
    if not ok then
      error("train: " .. tostring(err):gsub("^[^:]*%.lua:%d+: ", ""), 3)
    end
  end
  if type(out.resume) == "string" and not util.is_directory(out.resume) then
    error(("train: resume = '%s' is not a checkpoint directory (resume = true takes checkpoint_dir's latest)"):format(
      out.resume), 3)
  elseif type(out.resume) ~= "string" and type(out.resume) ~= "boolean" then
    error(("train: resume must be true, false or a checkpoint directory, got %s"):format(type(out.resume)), 3)
  end
  if type(out.data) == "table" and out.data.tokens ~= nil then  -- a token file (slapo-lua tokenize)
    util.check_options(out.data, { "tokens", "batch", "seq", "seed", "documents" }, "train: data", 3)
    local documents = out.data.documents
    if documents ~= nil and documents ~= "joined" and documents ~= "separate" then
      error(("train: data.documents must be \"joined\" (documents run into each other in a row, the default) or "
        .. "\"separate\" (each attends only within itself), got %s"):format(tostring(documents)), 3)
    end
    for _, key in ipairs({ "batch", "seq", "seed" }) do
      local v = out.data[key]
      if key ~= "seed" or v ~= nil then
        if type(v) ~= "number" or v ~= math.floor(v) or v < (key == "seed" and 0 or 1) then
          error(("train: data.%s must be a whole number (data = {tokens = file, batch = rows per micro-batch over all "
            .. "replicas, seq =, seed = 0}), got %s"):format(key, tostring(v)), 3)
        end
      end
    end
    if type(out.data.tokens) == "string" then
      local ok, file = pcall(slapo.token_file, out.data.tokens)
      if not ok then error("train: data.tokens: " .. tostring(file), 3) end
      out.data = { tokens = file, batch = out.data.batch, seq = out.data.seq, seed = out.data.seed,
        documents = out.data.documents }
    end
  elseif type(out.data) == "table" then  -- synthetic batches: every size given, as a whole number
    util.check_options(out.data, { "vocab", "batch", "seq" }, "train: data", 3)
    for _, key in ipairs({ "vocab", "batch", "seq" }) do
      local v = out.data[key]
      if type(v) ~= "number" or v ~= math.floor(v) or v < 1 then
        error(("train: data.%s must be a whole number >= 1 (data = {vocab =, batch =, seq =}), got %s"):format(key,
          tostring(v)), 3)
      end
    end
  elseif type(out.data) ~= "function" then
    error(("train: 'data' must be a function(step, micro) returning token ids, {tokens = file, batch =, seq =} or "
      .. "{vocab =, batch =, seq =}, got %s")
      :format(type(out.data)), 3)
  end
  return out
end

--- The learning rate of optimizer step `step` (1-based), as transformers' schedules give it:
--- get_cosine_schedule_with_warmup (with min_lr: get_cosine_with_min_lr_schedule_with_warmup),
--- get_linear_schedule_with_warmup, get_constant_schedule_with_warmup, whose lambda takes the steps
--- taken before, 0 .. steps - 1. So warm-up starts at 0, and the last step still trains: the decay
--- reaches min_lr only after it.
function M.lr_at(step, opts)
  local taken, warmup, steps = step - 1, opts.warmup, opts.steps
  if taken < warmup then
    return opts.lr * taken / math.max(1, warmup)
  end
  if opts.schedule == "constant" then
    return opts.lr
  end
  if opts.schedule == "linear" then
    return opts.lr * math.max(0, (steps - taken) / math.max(1, steps - warmup))
  end
  local progress = (taken - warmup) / math.max(1, steps - warmup)
  local factor = 0.5 * (1 + math.cos(math.pi * progress))
  return math.max(0, opts.min_lr + factor * (opts.lr - opts.min_lr))
end

--- Synthetic token batches: a fixed random batch per micro-step index (the loss falls as the model
--- learns it), the same on every rank of a tensor-parallel group; each data-parallel replica
--- (`replica`, 0-based) draws rows of its own, as a data loader would give it.
function M.synthetic(spec, replica)
  local batches = {}
  return function(_, micro)
    if not batches[micro] then
      -- drawn from its own seed, leaving the training run's random stream (dropout) untouched;
      -- replica 0 keeps the batches a single replica always had
      local saved = slapo.rng_state()
      slapo.manual_seed((spec.seed or 0) * 1000 + micro + (replica or 0) * 1000003)
      batches[micro] = slapo.randint(0, spec.vocab, { spec.batch, spec.seq })
      slapo.set_rng_state(saved)
    end
    return batches[micro]
  end
end

--- Batches from a token file (slapo.token_file): micro-batch `micro` of step `step` is the file's
--- global step (step - 1) x grad_accum + micro, `spec.batch` rows over all replicas, of which this
--- replica (0-based, of `replicas`) takes its part. A pure function of the step, so a run resumed
--- from a checkpoint sees the batches an uninterrupted run sees, on any number of replicas.
function M.token_batches(spec, model, grad_accum, replica, replicas)
  local file = spec.tokens
  local ok, config = pcall(slapo.models.config, model)
  local vocab = ok and type(config) == "table" and config.vocab_size
  if vocab and file.vocab_size > vocab then
    error(("train: data.tokens holds ids up to %d (its tokenizer's vocabulary), past the model's vocab_size %d: "
      .. "tokenize with the model's own tokenizer"):format(file.vocab_size - 1, vocab), 0)
  end
  if spec.batch % replicas ~= 0 then
    error(("train: data.batch %d (rows per micro-batch over all replicas) does not split over %d data-parallel "
      .. "replicas"):format(spec.batch, replicas), 0)
  end
  local separate = spec.documents == "separate"
  return function(step, micro)
    return file:batch({ step = (step - 1) * grad_accum + micro, batch = spec.batch, seq = spec.seq,
      rank = replica or 0, ranks = replicas or 1, seed = spec.seed or 0, positions = separate })
  end
end

--- What fixes a token-file run's batches: the file (its token, document and vocabulary counts) and how
--- it is read. Checkpoints keep it; a resume with other values would see other batches.
function M.data_identity(opts)
  local d = type(opts.data) == "table" and opts.data.tokens and opts.data
  if type(opts.data) == "table" and opts.data.vocab then  -- random rows of a shape: the shape fixes them
    return { vocab_size = opts.data.vocab, batch = opts.data.batch, seq = opts.data.seq, grad_accum = opts.grad_accum,
      random = true }
  end
  if not d then
    return nil
  end
  return { tokens = d.tokens.tokens, documents = d.tokens.documents, vocab_size = d.tokens.vocab_size,
    batch = d.batch, seq = d.seq, seed = d.seed or 0, grad_accum = opts.grad_accum,
    packing = d.documents or "joined" }
end

-- Refuses a resume whose data would give other batches than the run that wrote the checkpoint.
local function check_same_data(from, saved, now)
  if not saved or not now then
    return
  end
  local differ = {}
  for _, key in ipairs({ "random", "tokens", "documents", "vocab_size", "batch", "seq", "seed", "grad_accum",
    "packing" }) do
    if saved[key] ~= now[key] then
      table.insert(differ, ("%s %s, now %s"):format(key, tostring(saved[key]), tostring(now[key])))
    end
  end
  if #differ > 0 then
    error(("train: %s was trained on other data, so resuming would not see the batches that run saw (%s); "
      .. "give the same token file, batch, seq, seed, documents and grad_accum, or resume = false to start over")
      :format(from, table.concat(differ, "; ")), 0)
  end
end

local function json_line(fields)
  local parts = {}
  for _, kv in ipairs(fields) do
    local v = kv[2]
    local whole = type(v) == "number" and v == math.floor(v) and math.abs(v) < 1e15  -- steps past 999,999 too
    local text = whole and string.format("%.0f", v) or type(v) == "number" and string.format("%.6g", v)
      or type(v) == "table" and slapo.json_encode(v) or string.format("%q", tostring(v))
    table.insert(parts, string.format("%q: %s", kv[1], text))
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local with_commas = util.with_commas

--- What a tuner trial reports: the median step after warm-up (the first step, and the second
--- too in runs of 5 steps or more, pay for allocations and first-call work).
function M.trial_metrics(step_seconds, first, last, tokens, peak_mib)
  local warmup = (last - first + 1) >= 5 and 2 or ((last - first + 1) >= 2 and 1 or 0)
  local times = {}
  for step = first + warmup, last do
    table.insert(times, step_seconds[step])
  end
  if #times == 0 then
    return nil
  end
  table.sort(times)
  local median = #times % 2 == 1 and times[(#times + 1) / 2] or (times[#times / 2] + times[#times / 2 + 1]) / 2
  return { step_s = median, tokens_per_s = tokens / median, peak_mib = peak_mib, steps_measured = #times }
end

-- The data-parallel replicas of a run: the layout's DP group, or every rank under zero_adamw
-- without a layout (ZeRO's default group). Returns the group (nil for one replica), its size and
-- this rank's place in it.
local function replicas_of(opts, fully_sharded)
  if opts.layout then
    return opts.layout.dp > 1 and opts.layout.dp_group or nil, opts.layout.dp, opts.layout.dp_rank
  end
  if (opts.optimizer == "zero_adamw" or fully_sharded) and slapo.dist.world_size() > 1 then
    return slapo.dist.world(), slapo.dist.world_size(), slapo.dist.rank()
  end
  return nil, 1, 0
end

-- The tensor-parallel group: `group`, else a layout's TP group. Schedule files shard over it and
-- clipping counts its shards once.
local function tp_group_of(opts)
  return opts.group or (opts.layout and opts.layout.tp_group) or nil
end

-- The optimizer of a run over `params` (the model's, or a pipeline's stages'); zero_adamw shards its
-- state over the data-parallel group.
local function make_optimizer(model, opts, pipe)
  local params = pipe and pipe:parameters() or model
  if opts.optimizer == "zero_adamw" then
    -- experts spread by shard_experts shard over the ranks holding the same ones (none besides
    -- this rank when the experts are spread over every replica)
    local layout, expert_group = opts.layout, nil
    if layout and next(model:expert_groups()) then
      expert_group = layout.ep > 1 and layout.expert_dp_group or false
    end
    local average = not pipe or require("slapo.train_pipeline").zero_averages(pipe, opts)
    return slapo.optim.zero_adamw(params, { lr = opts.lr, weight_decay = opts.weight_decay,
      group = layout and layout.dp_group or nil, expert_group = expert_group, average = average })
  end
  local make = opts.optimizer == "adamw" and slapo.optim.adamw or slapo.optim.sgd
  return make(params, { lr = opts.lr, weight_decay = opts.weight_decay })
end

-- The names of the parameters whose gradients arrive averaged over the replicas already (a set),
-- or nil when there are none: those fully_shard slices (the layout averages shard_experts' experts
-- over the replicas holding them, layout:all_reduce_grads).
local function fully_sharded_of(model)
  local names = model:fully_sharded_parameters()
  if #names == 0 then
    return nil
  end
  local set = {}
  for _, name in ipairs(names) do
    set[name] = true
  end
  return set
end

-- Training expert-parallel blocks: each spreads its experts over the layout's ep_group (or over its
-- whole dp_group), so that the layout averages each expert over the ranks holding it alone.
local function check_experts(model, opts)
  local groups = model:expert_groups()
  local blocks = {}
  for path in pairs(groups) do table.insert(blocks, path) end
  if #blocks == 0 then return end
  table.sort(blocks)
  local function list(ranks) return "{" .. table.concat(ranks, ", ") .. "}" end
  if opts.optimizer == "zero_adamw" and opts.schedule_file then
    error(("train: zero_adamw with shard_experts (%s) and a schedule_file: hot swapping carries ZeRO's moments of "
      .. "models whose ranks hold the same parameters; train with optimizer = \"adamw\" to swap schedules"):format(
      blocks[1]), 0)
  end
  local layout = opts.layout
  if not layout then
    error(("train: %s spreads its experts over ranks %s (shard_experts): give layout = slapo.parallel.layout{ep = %d} "
      .. "(its ep_group the experts' group), so that each expert is averaged over the ranks holding it"):format(
      blocks[1], list(groups[blocks[1]]), #groups[blocks[1]]), 0)
  end
  local inside = {}
  for _, r in ipairs(layout.dp_ranks) do inside[r] = true end
  local want = layout.ep > 1 and layout.ep_ranks or layout.dp_ranks
  for _, path in ipairs(blocks) do
    local ranks = groups[path]
    for _, r in ipairs(ranks) do
      if not inside[r] then
        error(("train: %s spreads its experts over ranks %s, which are not inside this rank's data-parallel ranks %s "
          .. "(%s): an expert group is made of replicas; shard_experts{group = layout.ep_group}"):format(path,
          list(ranks), list(layout.dp_ranks), tostring(layout)), 0)
      end
    end
    if list(ranks) ~= list(want) then
      error(("train: %s spreads its experts over ranks %s, but the layout's %s is %s; shard_experts{group = "
        .. "layout.ep_group} with layout = slapo.parallel.layout{ep = %d}"):format(path, list(ranks),
        layout.ep > 1 and "ep group" or "data-parallel group (ep = 1: the experts over every replica)", list(want),
        #ranks), 0)
    end
  end
end

-- A layout's replicas must not be split by `shard` across each other: a schedule created over the
-- world (the default group) on a data-parallel layout shards over replicas holding other rows.
local function check_shard_groups(model, opts)
  local layout = opts.layout
  if not layout then return end
  local want = "{" .. table.concat(layout.tp_ranks, ", ") .. "}"
  for _, ranks in ipairs(model:shard_groups()) do
    local got = "{" .. table.concat(ranks, ", ") .. "}"
    if got ~= want then
      error(("train: the model's parameters are split by shard over ranks %s, but this rank's tensor-parallel group in "
        .. "the layout is %s (%s): create the schedule over it, slapo.create_schedule(model, {group = "
        .. "layout.tp_group})"):format(got, want, tostring(layout)), 0)
    end
  end
end

-- A model whose sequences context_parallel splits trains on a layout whose cp group is those
-- ranks: they must take the same rows (the layout's data replicas), and the DP group averages
-- their gradients, each rank's part of the whole sequence's.
local function check_context_parallel(model, opts)
  local ranks = model:context_parallel_ranks()
  local cp = opts.layout and opts.layout.cp or 1
  if not ranks and cp == 1 then return end
  local got = ranks and "{" .. table.concat(ranks, ", ") .. "}"
  if not opts.layout or cp == 1 then
    error(("train: the model splits its sequences over ranks %s (context_parallel); train it with layout = "
      .. "slapo.parallel.layout{cp = %d}, whose cp group those ranks are"):format(got, #ranks), 0)
  end
  local want = "{" .. table.concat(opts.layout.cp_ranks, ", ") .. "}"
  if got ~= want then
    error(("train: the layout has cp = %d (this rank's cp group %s), but the model %s; apply "
      .. "sch:context_parallel{group = layout.cp_group}"):format(cp, want,
      got and "splits its sequences over ranks " .. got or "does not split its sequences (context_parallel)"), 0)
  end
end

-- Averages the gradients over the replicas, one all-reduce per parameter, except those of
-- `skip` (fully_shard's backward averaged them already).
local function average_gradients(opts, model, group, replicas, skip)
  if opts.layout then
    return opts.layout:all_reduce_grads(model, skip)
  end
  for name, p in model:named_parameters() do
    if p.grad and not (skip and skip[name]) then
      slapo.dist.all_reduce(p.grad, group)
      p.grad:mul_(1 / replicas)
    end
  end
end

-- Makes every replica hold the averaged gradient before clipping. ZeRO averages as it
-- reduce-scatters inside step(), which is too late for clipping: there it averages once more here
-- (identical gradients average to themselves), and only when clipping asks for it.
local function reduce_gradients(opts, model, group, replicas, fully_sharded)
  if not group then
    return
  end
  if opts.optimizer ~= "zero_adamw" or opts.clip > 0 then
    average_gradients(opts, model, group, replicas, fully_sharded)
  end
end

-- The step's loss and token count over every replica: each replica's loss is the mean over its
-- own rows, equally many everywhere, so the global loss is the mean of theirs. Same on every rank.
local function global_step(loss, tokens, group, replicas)
  if not group then
    return loss, tokens
  end
  local sums = slapo.tensor({ loss, tokens }, { dtype = "float64" })
  slapo.dist.all_reduce(sums, group)
  local v = sums:tolist()
  return v[1] / replicas, v[2]
end

-- The token ids `data` gives for a micro-batch, refused with the step when they are not ids.
local function batch_at(data, step, micro)
  local ok, ids, positions = pcall(data, step, micro)
  if not ok then
    error(("train: step %d, micro-batch %d: the data function failed: %s"):format(step, micro, tostring(ids)), 0)
  end
  if not slapo.is_tensor(ids) then
    error(("train: step %d, micro-batch %d: the data function must return a tensor of token ids [batch, seq], got %s")
      :format(step, micro, type(ids)), 0)
  end
  local dtype = ids:dtype()
  if ids:dim() ~= 2 or (dtype ~= "int64" and dtype ~= "int32") then
    error(("train: step %d, micro-batch %d: the data function must return int64 token ids [batch, seq], got %s [%s]")
      :format(step, micro, dtype, table.concat(ids:size(), ", ")), 0)
  end
  return ids, positions
end

-- The labels of packed documents kept apart: -100 (not trained) where a document starts, so no
-- token is trained to predict the next document's first.
local function document_labels(ids, positions)
  local starts = positions:eq(0):long()
  return (ids - (ids + 100) * starts):long()
end

-- The micro-batch's loss. A model that fails on it (a token id past the vocabulary, a sequence
-- longer than its positions) is reported with the step and what the batch held; the check costs
-- nothing on the way that works.
local function forward_loss(model, ids, opts, step, micro, positions)
  -- packed documents kept apart: no token is trained to predict the next document's first
  local function forward()
    if opts.masked_lm then  -- BERT's objective: the chosen tokens hidden, the loss over them
      local inputs, labels = require("slapo.masked_lm").mask(ids, opts.masked_lm)
      return model(inputs, { labels = labels })
    end
    if opts.span_corruption then  -- T5's: spans dropped for sentinels, the decoder writes them
      local inputs, labels = require("slapo.span_corruption").corrupt(ids, opts.span_corruption)
      return model(inputs, { labels = labels })
    end
    if not positions then
      return model(ids, { labels = ids })
    end
    return model(ids, { labels = document_labels(ids, positions), position_ids = positions })
  end
  local ok, loss = pcall(function()
    return opts.autocast and slapo.autocast(opts.autocast, forward) or forward()
  end)
  if not ok and positions then require("slapo.train_pipeline").refuse_positions(loss, model) end
  if not ok then
    error(("train: step %d, micro-batch %d: the model failed on the data function's token ids (input_ids and "
      .. "labels: shape [%s], ids %d .. %d): %s"):format(step, micro, table.concat(ids:size(), ", "),
      ids:min():item(), ids:max():item(), tostring(loss)), 0)
  end
  return loss
end

-- With schedule_file: the model is make_model() scheduled by the file, re-applied when it changes.
local function scheduled_model(opts)
  local swap = require("slapo.hot_swap")
  local fn, err = swap.load(opts.schedule_file)
  if not fn then
    error("train: " .. err, 0)
  end
  local ok, sch = swap.apply(opts.make_model, fn, tp_group_of(opts))
  if not ok then
    error("train: " .. opts.schedule_file .. ": " .. sch, 0)
  end
  return sch
end

-- At a step boundary: has the schedule file changed? Rank 0 decides for every rank.
local function schedule_changed(opts, state)
  local mtime = slapo._file_mtime(opts.schedule_file) or state.mtime
  local flag = slapo.tensor({ (slapo.dist.rank() == 0 and mtime ~= state.mtime) and 1 or 0 })
  slapo.dist.all_reduce(flag)
  state.mtime = mtime
  return flag:item() > 0
end

-- True on every rank when `ok` is false on any.
local function failed_anywhere(ok)
  local failed = slapo.tensor({ ok and 0 or 1 })
  slapo.dist.all_reduce(failed)
  return failed:item() > 0
end

-- Applies the changed file on every rank; all swap, or (any failure) none does.
local function try_swap(opts, state, step, rank0)
  local swap = require("slapo.hot_swap")
  local fn, err = swap.load(opts.schedule_file)
  local ok, sch = false, err
  if fn then
    ok, sch = swap.apply(opts.make_model, fn, tp_group_of(opts))
  end
  local optimizer, carried
  if not failed_anywhere(ok) then
    -- carrying only writes into the new model: on a failure the running one is intact
    local zero_group = opts.optimizer == "zero_adamw"
      and (opts.layout and opts.layout.dp_group or slapo.dist.world())
    local moved, result = xpcall(function()
      optimizer = make_optimizer(sch.mod, opts)
      return swap.carry(state.sch, state.optimizer, sch, optimizer, zero_group)
    end, slapo._traceback)
    ok, carried = moved, result
    if not moved then
      sch = "carrying the weights and optimizer state over: " .. tostring(result)
    end
  end
  if failed_anywhere(ok) then
    if rank0 then
      io.stderr:write(("[swap] step %d: %s failed, training goes on with the previous schedule:\n%s\n"):format(step,
        opts.schedule_file, ok and "(on another rank)" or tostring(sch)))
    end
    return false
  end
  if rank0 then
    print(("[swap] step %d: applied %s (%d parameters carried over)"):format(step, opts.schedule_file, carried))
    io.stdout:flush()
  end
  state.sch, state.optimizer = sch, optimizer
  return true
end

-- A resumed run keeps the metrics lines of the steps before it and drops later ones (written by a
-- run killed after its last checkpoint, and trained again now), so each step appears once.
local function open_metrics(path, first_step)
  local function open(name, mode)
    local f, err = io.open(name, mode)
    if not f then
      error(("train: metrics = '%s' cannot be written: %s"):format(path, err), 0)
    end
    return f
  end
  if first_step == 1 then
    return open(path, "w")
  end
  local kept = {}
  local old = io.open(path, "r")
  if old then
    for line in old:lines() do
      local step = tonumber(line:match('^{"step": ([^,}]+)'))
      if step and step < first_step then
        table.insert(kept, line .. "\n")
      end
    end
    old:close()
  end
  local tmp = open(path .. ".tmp", "w")
  tmp:write(table.concat(kept))
  tmp:close()
  assert(os.rename(path .. ".tmp", path))
  return open(path, "a")
end

-- The losses of steps 1..step as trainer.json keeps them (keyed by step: a run resumed from a
-- checkpoint of an older version knows only its own).
local function losses_record(losses, step)
  local out = {}
  for s = 1, step do
    if losses[s] then
      out[tostring(s)] = losses[s]
    end
  end
  return out
end

-- Resumes from `resume` (or the checkpoint dir's latest); returns the first step to train, and
-- fills `losses` with the steps the checkpoint recorded.
local function resume_run(opts, model, optimizer, losses, rank0, scaler)
  local checkpoint = require("slapo.checkpoint")
  -- a named checkpoint resumes with or without checkpoint_dir; resume = true looks in checkpoint_dir
  local named = type(opts.resume) == "string" and opts.resume or nil
  if not named and not (opts.checkpoint_dir and opts.resume) then
    return 1
  end
  local from = named or checkpoint.latest(opts.checkpoint_dir)
  if not from then
    return 1
  end
  local step, trainer = checkpoint.load(from, model, optimizer)
  check_same_data(from, trainer.data, M.data_identity(opts))
  if type(opts.data) == "function" and rank0 and not opts.quiet then
    print(("resume: data is a function, which a checkpoint cannot record, so this run cannot check that step %d "
      .. "gets the batch the saved run would have; token files (data = {tokens = ...}) are checked"):format(step + 1))
  end
  if step > opts.steps then
    error(("train: %s is at step %d, past steps = %d (resume = false starts over)"):format(from, step, opts.steps), 0)
  end
  for s, loss in pairs(trainer.losses or {}) do
    losses[tonumber(s)] = loss
  end
  if scaler and trainer.scaler then  -- float16: the loss scale goes on from where it was
    scaler:set_state(trainer.scaler)
  end
  if rank0 and not opts.quiet then
    print(step == opts.steps and ("%s finished all %d steps: nothing to train"):format(from, step)
      or ("resumed from %s at step %d"):format(from, step + 1))
  end
  return step + 1
end

-- What a step holds, for the memory column and metrics.jsonl: on a CPU the process's resident
-- memory; on a GPU CUDA's caching allocator's peaks during the step (tensors allocated, and what
-- it reserved from the driver), the resident memory beside them.
local function step_memory(device)
  local gpu = tostring(device):match("^cuda:?(%d*)$")
  if not gpu then
    return { start = function() end, finish = function()
      local mib = slapo.memory_mib()
      return { mib = mib, text = ("%d MiB"):format(mib), fields = {} }
    end }
  end
  local index = tonumber(gpu) or 0
  return {
    start = function() slapo.cuda.reset_peak_memory_stats(index) end,
    finish = function()
      local cuda = slapo.cuda.memory_stats(index)
      return { mib = cuda.peak_allocated_mib,
        text = ("%d MiB allocated, %d reserved"):format(cuda.peak_allocated_mib, cuda.peak_reserved_mib),
        fields = { { "cuda_peak_allocated_mib", cuda.peak_allocated_mib },
          { "cuda_peak_reserved_mib", cuda.peak_reserved_mib }, { "resident_mib", slapo.memory_mib() } } }
    end,
  }
end

function M.run(user_opts)
  local opts = check_options(user_opts)
  if opts.seed then  -- before make_model too, so its initialisation and fork_rng seeds are the run's
    slapo.manual_seed(opts.seed)
  end
  local swap_state
  if opts.schedule_file then
    local sch = scheduled_model(opts)
    swap_state = { sch = sch, mtime = slapo._file_mtime(opts.schedule_file) }
    opts.model = sch.mod
  end
  -- a pipeline trains one pipe:step a step; its module answers what a module's would
  local pipelines = require("slapo.train_pipeline")
  local pipe = pipelines.is_pipeline(opts.model) and opts.model or nil
  local model = pipe and pipe.module or opts.model
  -- fully_shard: data parallelism over the world (or a layout's dp_group), its gradients averaged
  -- by its own backward (a pipeline's too, stage by stage, and the rest by its dp_group)
  check_experts(model, opts)
  check_shard_groups(model, opts)
  check_context_parallel(model, opts)
  local fully_sharded = not pipe and fully_sharded_of(model) or nil
  if fully_sharded and opts.optimizer == "zero_adamw" then
    error("train: zero_adamw on a fully sharded model: its AdamW state is already 1/N of each parameter; "
      .. "use optimizer = \"adamw\"", 0)
  end
  local group, replicas, replica = replicas_of(opts, fully_sharded)
  if pipe and not pipelines.replicas_draw_own_rows(pipe) then  -- stage meshes: the whole batch on every rank
    group, replicas, replica = nil, 1, 0
  end
  -- context parallelism: the ranks of a cp group split the same rows, each counting 1/cp of them
  local cp = opts.layout and opts.layout.cp or 1
  local data_replica, data_replicas = replica, replicas
  if cp > 1 then data_replica, data_replicas = opts.layout.data_replica, opts.layout.data_replicas end
  local tp_group = tp_group_of(opts)
  local data = type(opts.data) == "function" and opts.data
    or opts.data.tokens and M.token_batches(opts.data, model, opts.grad_accum, data_replica, data_replicas)
    or M.synthetic(opts.data, data_replica)
  local rank0 = slapo.dist.rank() == 0
  -- where and in what dtype the matmuls run: the batches go there, and the peak is measured there
  local device = require("slapo.kernel_choices").model_device(model)
  if pipe then  -- traced for the batches' shape: its stages' parameters are known from here
    local ids, positions = batch_at(data, 1, 1)
    pipelines.prepare(pipe, ids:to(device), positions and positions:to(device))
  end
  local optimizer = make_optimizer(model, opts, pipe)
  if swap_state then
    swap_state.optimizer = optimizer
  end
  local terminal = slapo._stdout_is_terminal() and not opts.quiet
  local first_param = model:parameters()[1]
  local matmul_dtype = ({ bf16 = "bfloat16", fp16 = "float16" })[opts.autocast] or opts.autocast
    or (first_param and first_param:dtype()) or "float32"
  local peak = slapo.measure_peak_flops({ device = device, dtype = matmul_dtype })
  local step_flops = require("slapo.step_flops")
  local row_flops = pipe and step_flops.pipeline_per_row(pipe, tp_group, pipe.on_meshes and opts.layout.dp or 1)
    or step_flops.per_row(model, tp_group, opts.span_corruption)
  local losses, grad_norms = {}, {}
  local checkpoint = require("slapo.checkpoint")
  -- float16's narrow range needs the loss scaled up before backward and the gradients back down
  local scaler = (opts.autocast == "fp16" or opts.autocast == "float16") and slapo.optim.grad_scaler() or nil
  if opts.checkpoint_dir then
    require("slapo.checkpoint").prepare(opts.checkpoint_dir)
  end
  local first_step = resume_run(opts, pipe or model, optimizer, losses, rank0, scaler)
  local metrics = opts.metrics and rank0 and open_metrics(opts.metrics, first_step)
  model:train()
  local step_seconds, step_tokens, peak_mib = {}, 0, 0
  local memory = step_memory(device)
  for step = first_step, opts.steps do
    if swap_state and schedule_changed(opts, swap_state) and try_swap(opts, swap_state, step, rank0) then
      model, optimizer = swap_state.sch.mod, swap_state.optimizer
      model:train()
      row_flops = step_flops.per_row(model, tp_group, opts.span_corruption)
    end
    memory.start()
    local started = slapo.clock()
    local lr = M.lr_at(step, opts)
    optimizer:set_lr(lr)
    optimizer:zero_grad()
    local summed, tokens, seq_len = nil, 0, 0  -- the loss stays on its device until the step ends: one host read
    if pipe then  -- one pipe:step, cut into the pipeline's micro-batches (grad_accum is 1)
      local ids, positions = batch_at(data, step, 1)
      ids, positions = ids:to(device), positions and positions:to(device)
      seq_len, tokens = ids:size()[2], ids:numel() / cp
      summed = slapo.tensor({ pipelines.step(pipe, ids, opts, step, positions and document_labels(ids, positions),
        positions) }, { dtype = "float64" })
    end
    for micro = 1, pipe and 0 or opts.grad_accum do
      local ids, positions = batch_at(data, step, micro)
      ids, positions = ids:to(device), positions and positions:to(device)
      seq_len = ids:size()[2]
      local loss = forward_loss(model, ids, opts, step, micro, positions) / opts.grad_accum
      local scaled = scaler and scaler:scale(loss) or loss
      scaled:backward()
      summed = summed and summed + loss:detach() or loss:detach()
      tokens = tokens + ids:numel() / cp
    end
    local total, all_tokens = global_step(summed:item(), tokens, group, replicas)
    if not pipe then  -- a pipeline combined its replicas' gradients in its step (averaged on one layout,
      -- added up on stage meshes), or zero_adamw does in its
      reduce_gradients(opts, model, group, replicas, fully_sharded)
    else
      pipelines.combine_before_clipping(pipe, opts)
    end
    local overflow = scaler and scaler:unscale(model)
    if scaler and slapo.dist.world_size() > 1 then  -- every rank skips the same steps
      local flag = slapo.tensor({ overflow and 1 or 0 })
      slapo.dist.all_reduce(flag)
      overflow = flag:item() > 0
    end
    local norm = opts.clip > 0 and slapo.clip_grad_norm(pipe or model, opts.clip, tp_group) or nil
    if not overflow then
      optimizer:step()
    end
    if scaler then
      scaler:update(overflow)
    end
    local seconds = slapo.clock() - started
    step_seconds[step], step_tokens = seconds, all_tokens
    local held = memory.finish()
    peak_mib = math.max(peak_mib, held.mib)
    local tps = all_tokens / seconds
    -- this rank's share: 6 per parameter per token, and attention's
    local flops = row_flops(seq_len) * tokens / seq_len / seconds
    if flops > peak then  -- the peak was measured while something else loaded the machine: again
      peak = math.max(peak, slapo.measure_peak_flops({ device = device, dtype = matmul_dtype }))
    end
    losses[step], grad_norms[step] = total, norm
    local record = { { "step", step }, { "loss", total }, { "lr", lr }, { "tokens_per_s", tps },
      { "tflops", flops / 1e12 }, { "mfu", flops / peak }, { "memory_mib", held.mib }, { "seconds", seconds } }
    for _, field in ipairs(held.fields) do
      table.insert(record, field)
    end
    if norm then
      table.insert(record, { "grad_norm", norm })
    end
    if step == first_step and #slapo.knobs() > 0 then  -- which configuration of the knobs ran
      table.insert(record, { "knobs", require("slapo.knobs").values() })
    end
    if metrics then
      metrics:write(json_line(record), "\n")
      metrics:flush()
    end
    if rank0 and not opts.quiet then
      local line = ("step %4d | loss %.4f | lr %.2e | %s tok/s | %.2f TFLOP/s | MFU %.1f%% | %s"):format(step,
        total, lr, with_commas(tps), flops / 1e12, 100 * flops / peak, held.text)
      if terminal then
        local width = 20
        local done = math.floor(width * step / opts.steps)
        io.stdout:write("\r", "[", string.rep("#", done), string.rep(".", width - done), "] ", line)
        if step % opts.log_every == 0 or step == opts.steps then
          io.stdout:write("\n")
        end
        io.stdout:flush()
      elseif step % opts.log_every == 0 or step == opts.steps then
        print(line)
        io.stdout:flush()  -- a log file or pipe sees each line as it comes, even if the run is killed
      end
    end
    if opts.on_step then
      opts.on_step(step, pipe or model)
    end
    -- the last step too: a finished run run again finds its result there
    local due = opts.checkpoint_every > 0 and (step % opts.checkpoint_every == 0 or step == opts.steps)
    if opts.checkpoint_dir and due then
      -- the schedule that produced these weights travels with them
      local log = opts.schedule_log or (swap_state and swap_state.sch:log()) or nil
      checkpoint.save(opts.checkpoint_dir, step, pipe or model, optimizer, log,
        { losses = losses_record(losses, step), scaler = scaler and scaler:state() or nil,
          data = M.data_identity(opts) })
    end
  end
  if metrics then
    metrics:close()
  end
  local measured = M.trial_metrics(step_seconds, first_step, opts.steps, step_tokens, peak_mib)
  if measured and os.getenv("SLAPO_TUNE_REPORT") then
    slapo.report(measured)
  end
  return { losses = losses, grad_norms = grad_norms, final_loss = losses[opts.steps], first_step = first_step,
    steps = opts.steps, step_s = measured and measured.step_s, model = pipe or model, optimizer = optimizer,
    schedule = swap_state and swap_state.sch or nil }
end

return M
