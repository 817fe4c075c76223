--- Swapping the schedule of a model while it trains: the schedule file is applied to a fresh
--- copy of the original model, and the weights and optimizer state move over by parameter name
--- (gathered to full size and re-sliced, so a parameter may change its sharding); training goes
--- on from the same step. A schedule that fails to load or apply leaves the running one in place.
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
  local ok, result = xpcall(chunk, debug.traceback)
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
  end, debug.traceback)
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

--- Moves parameters and optimizer state from the old schedule to the new one. Every rank of the
--- group calls it (full_param gathers). Returns how many parameters were carried.
function M.carry(old_sch, old_opt, new_sch, new_opt)
  local targets = {}
  for name, p in new_sch.mod:named_parameters() do
    targets[name] = p
  end
  local old_state = old_opt:state_tensors(old_sch.mod)
  local new_state, carried = {}, 0
  for name, p in old_sch.mod:named_parameters() do
    local full = old_sch:full_param(name, p)
    local target = targets[name]
    local owner, leaf = split(name)
    if target and same_shape(new_sch[owner]:param_info(leaf).full_shape, full:size()) then
      slapo.no_grad(function() target:copy_(new_sch:local_param(name, full)) end)
      carried = carried + 1
      for _, key in ipairs({ "exp_avg", "exp_avg_sq" }) do
        local s = old_state[name .. "." .. key]
        if s then
          new_state[name .. "." .. key] = new_sch:local_param(name, old_sch:full_param(name, s))
        end
      end
      new_state[name .. ".step"] = old_state[name .. ".step"]
    else
      for _, key in ipairs({ "exp_avg", "exp_avg_sq" }) do  -- keep the collectives in step
        if old_state[name .. "." .. key] then
          old_sch:full_param(name, old_state[name .. "." .. key])
        end
      end
    end
  end
  new_opt:load_state_tensors(new_sch.mod, new_state)
  return carried
end

return M
