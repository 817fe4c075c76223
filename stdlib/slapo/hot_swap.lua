--- Swapping the schedule of a model while it trains: the schedule file is applied to a fresh
--- copy of the original model, and the weights and optimizer state move over by parameter name
--- (gathered to full size and re-sliced, so a parameter may change its sharding); training goes
--- on from the same step. AdamW, SGD and ZeRO-1 state all move (ZeRO's flat slices are gathered and
--- cut per parameter). A schedule that fails to load, apply or carry leaves the running one in place.
---
--- A schedule file returns a function, or defines a global `schedule`:
---   return function(sch) require("slapo.schedules.gpt2").schedule(sch, {checkpoint = 0.5}) end
local M = {}

--- Loads a schedule file in its own environment; returns the function, or nil and the error.
function M.load(path)
  local chunk, err = loadfile(path)
  if not chunk then
    return nil, err
  end
  local env = setmetatable({}, { __index = _G })
  setfenv(chunk, env)
  local ok, result = xpcall(chunk, slapo._traceback)
  if not ok then
    return nil, result
  end
  local fn = type(result) == "function" and result or env.schedule
  if type(fn) ~= "function" then
    return nil, path .. ": a schedule file returns function(sch) or defines schedule(sch)"
  end
  return fn
end

--- A fresh model from make_model(), scheduled by fn over `group`; nil and the error on failure.
function M.apply(make_model, fn, group)
  local ok, result = xpcall(function()
    local sch = slapo.create_schedule(make_model(), group and { group = group } or nil)
    fn(sch)
    return sch
  end, slapo._traceback)
  if not ok then  -- the frames below the schedule's own are the trainer's
    result = tostring(result):gsub("\n[^\n]*stdlib/slapo/hot_swap%.lua.*$", "")
  end
  return ok, result
end

local function split(path)
  local owner, leaf = path:match("^(.*)%.([^%.]+)$")
  return owner or "", leaf or path
end

local same_shape = require("slapo.util").same_array

-- The parameters an optimizer updates (those that train), in its order: name, tensor pairs.
local function trained_parameters(model)
  local out = {}
  for name, p in model:named_parameters() do
    if p:requires_grad() then
      table.insert(out, { name = name, param = p })
    end
  end
  return out
end

local moments = { "exp_avg", "exp_avg_sq" }

-- ZeRO keeps each moment as one flat vector over the trained parameters, in slices across its
-- group; this gathers the slices and cuts them per parameter, as AdamW names its state.
local function zero_to_named(model, state, group)
  local named = {}
  for _, key in ipairs(moments) do
    local flat = slapo.dist.all_gather(state["zero." .. key], 0, group)
    local offset = 0
    for _, entry in ipairs(trained_parameters(model)) do
      local n = entry.param:numel()
      named[entry.name .. "." .. key] = flat:narrow(0, offset, n):reshape(entry.param:size())
      offset = offset + n
    end
  end
  return named
end

-- The other way: this rank's slices of the flat moments, from per-parameter state (zeros where a
-- parameter has none), with the step count of the old optimizer.
local function named_to_zero(model, named, zero_step, optimizer, group)
  local params = trained_parameters(model)
  local shard = optimizer:shard_numel()
  local total = 0
  for _, entry in ipairs(params) do
    total = total + entry.param:numel()
  end
  local state = { ["zero.step"] = zero_step, ["zero.total_numel"] = slapo.tensor({ total }, { dtype = "int64" }) }
  local on = { device = params[1].param:device() }
  for _, key in ipairs(moments) do
    local parts = {}
    for _, entry in ipairs(params) do
      local s = named[entry.name .. "." .. key]
      table.insert(parts, s and s:reshape({ -1 }) or slapo.zeros({ entry.param:numel() }, on))
    end
    local padding = shard * slapo.dist.world_size(group) - total
    if padding > 0 then
      table.insert(parts, slapo.zeros({ padding }, on))
    end
    state["zero." .. key] = slapo.cat(parts, 0):narrow(0, slapo.dist.rank(group) * shard, shard):clone()
  end
  return state
end

--- Moves parameters and optimizer state from the old schedule to the new one. Every rank of the
--- group calls it (full_param gathers). `zero_group`: the optimizers are zero_adamw over that group.
--- Returns how many parameters were carried.
function M.carry(old_sch, old_opt, new_sch, new_opt, zero_group)
  local targets = {}
  for name, p in new_sch.mod:named_parameters() do
    targets[name] = p
  end
  local old_state = old_opt:state_tensors(old_sch.mod)
  local zero_step = old_state["zero.step"]
  if zero_group then
    old_state = zero_to_named(old_sch.mod, old_state, zero_group)
  end
  local new_state, carried = {}, 0
  for name, p in old_sch.mod:named_parameters() do
    local full = old_sch:full_param(name, p)
    local target = targets[name]
    local owner, leaf = split(name)
    if target and same_shape(new_sch[owner]:param_info(leaf).full_shape, full:size()) then
      slapo.no_grad(function() target:copy_(new_sch:local_param(name, full)) end)
      carried = carried + 1
      for _, key in ipairs(moments) do
        local s = old_state[name .. "." .. key]
        if s then
          new_state[name .. "." .. key] = new_sch:local_param(name, old_sch:full_param(name, s))
        end
      end
      new_state[name .. ".step"] = old_state[name .. ".step"]
    else
      for _, key in ipairs(moments) do  -- keep the collectives in step
        if old_state[name .. "." .. key] then
          old_sch:full_param(name, old_state[name .. "." .. key])
        end
      end
    end
  end
  if zero_group then
    new_state = named_to_zero(new_sch.mod, new_state, zero_step, new_opt, zero_group)
  end
  new_opt:load_state_tensors(new_sch.mod, new_state)
  return carried
end

return M
