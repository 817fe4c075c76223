-- Shared by the *_schedule.lua examples: options from arg, the TP x DP layout, and a short
-- AdamW loop on a fixed synthetic batch (the loss falls as the model memorises it).
local M = {}

--- "--tp 2 --steps 5" -> {tp = 2, steps = 5}; unknown options are an error listing the valid ones.
function M.options(defaults)
  local opts = {}
  for k, v in pairs(defaults) do
    opts[k] = v
  end
  local i = 1
  while i <= #arg do
    local name = arg[i]:match("^%-%-([%w_]+)$")
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
    opts[name] = type(defaults[name]) == "number" and tonumber(value) or value
    if opts[name] == nil then
      error(("option --%s needs a number, got '%s'"):format(name, value), 0)
    end
    i = i + 2
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
--- and trains `opts.steps` steps. Returns the list of losses.
function M.run(opts, make_model, schedule)
  local layout = require("slapo.parallel").layout({ tp = opts.tp > 0 and opts.tp or slapo.dist.world_size() })
  log(("%d rank(s): tensor parallel %d x data parallel %d"):format(layout.world, layout.tp, layout.dp))
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
  model = slapo.build(sch)
  log(("%s: %.1fM parameters, %.1fM on this rank; %d primitives applied"):format(model:type(), full_params / 1e6,
    model:num_params() / 1e6, select(2, sch:log():gsub("\n  sch", ""))))

  local optimizer = slapo.optim.adamw(model, { lr = opts.lr, weight_decay = 0.0 })
  slapo.manual_seed(opts.seed + 1000 + layout.dp_rank)  -- each data-parallel replica its own batch
  local ids = slapo.randint(0, opts.vocab, { opts.batch, opts.seq })
  local losses = {}
  for step = 1, opts.steps do
    local start = os.clock()
    optimizer:zero_grad()
    local loss = model(ids, { labels = ids })
    loss:backward()
    layout:all_reduce_grads(model)
    optimizer:step()
    local value = loss:detach()
    slapo.dist.all_reduce(value, layout.dp_group)
    losses[step] = value:item() / layout.dp
    log(("step %d  loss %.4f  (%.2f s cpu)"):format(step, losses[step], os.clock() - start))
  end
  return losses
end

return M
