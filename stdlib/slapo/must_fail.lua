--- Must-fail scripts (tests/lua/errors): a bad call must raise a clear error and change nothing.
---
--- Example (tests/lua/errors/shard_fractional_axis.lua):
---   -- expect: shard: axis must be an integer from -64 to 63, got 0.5
---   local must_fail = require("slapo.must_fail")
---   local sch = must_fail.gpt2_schedule()
---   must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard("weight", 0.5) end)
--- `refuses` runs the call, checks that the schedule's log, module tree and every parameter are as
--- they were and that the message carries no traceback, then raises the call's own message, which
--- `slapo-lua test` compares with the script's `-- expect:` line.
local M = {}

--- A small GPT-2 (2 layers, width 16, 32 tokens) under a schedule with one primitive already
--- applied, so a log that must stay unchanged is not empty.
function M.gpt2_schedule()
  local sch = slapo.create_schedule(M.gpt2())
  sch["transformer.h.1.mlp.c_fc"]:shard("weight", 1)
  return sch
end

--- The same GPT-2, unscheduled.
function M.gpt2()
  slapo.manual_seed(3)
  return slapo.models.gpt2({ n_embd = 16, n_head = 2, n_layer = 2, vocab_size = 32, n_positions = 16 })
end

local function is_schedule(target)
  return getmetatable(target).__name == "slapo.Schedule"
end

local function snapshot(target)
  local schedule = is_schedule(target)
  local params = {}
  for name, p in (schedule and target.mod or target):named_parameters() do
    params[name] = p:detach():clone()
  end
  return { log = schedule and target:log() or "", tree = tostring(target), params = params }
end

local function check_unchanged(before, target)
  local after = snapshot(target)
  if after.log ~= before.log then
    error("must_fail: the failed call changed the schedule log:\n" .. after.log, 0)
  end
  if after.tree ~= before.tree then
    error("must_fail: the failed call changed the module tree:\n" .. after.tree, 0)
  end
  for name, old in pairs(before.params) do
    local now = after.params[name]
    if not now then
      error(("must_fail: the failed call removed parameter '%s'"):format(name), 0)
    end
    if not old:equal(now) then
      error(("must_fail: the failed call changed parameter '%s'"):format(name), 0)
    end
  end
  for name in pairs(after.params) do
    if not before.params[name] then
      error(("must_fail: the failed call added parameter '%s'"):format(name), 0)
    end
  end
end

--- Runs `fn`, which must raise; `target` (a schedule or a module, or nil) must be unchanged after.
--- Raises the call's message (or a must_fail: message saying what went wrong).
function M.refuses(target, fn)
  local before = target and snapshot(target)
  local ok, err = pcall(fn)
  if ok then
    error("must_fail: the call succeeded", 0)
  end
  err = tostring(err)
  if err:find("stack traceback", 1, true) then
    error("must_fail: the message carries a traceback: " .. err, 0)
  end
  if target then
    check_unchanged(before, target)
  end
  error(err, 0)
end

return M
