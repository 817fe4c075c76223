--- Training checkpoints: the model, the optimizer state, the random state and the step, in
--- safetensors + JSON, written into a temporary directory that is renamed into place, so a kill
--- in the middle of a save never loses the last good checkpoint.
---
--- Layout:  DIR/step-000100/{model-rank0.safetensors, optimizer-rank0.safetensors, trainer.json}
---          DIR/latest  (the name of the newest complete checkpoint)
local M = {}

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local read_file = require("slapo.util").read_file

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- Saves a checkpoint of `step`; every rank calls it. `log` is the schedule log (Lua source).
function M.save(dir, step, model, optimizer, log)
  local rank, world = slapo.dist.rank(), slapo.dist.world_size()
  local name = ("step-%06d"):format(step)
  local tmp = ("%s/.%s.tmp"):format(dir, name)
  if rank == 0 then
    assert(os.execute("rm -rf " .. shell_quote(tmp) .. " && mkdir -p " .. shell_quote(tmp)) == 0,
      "checkpoint: cannot create " .. tmp)
  end
  slapo.dist.barrier()
  slapo.save_tensors(("%s/model-rank%d.safetensors"):format(tmp, rank), model:state_dict())
  local state = optimizer:state_tensors(model)
  state["rng.cpu"] = slapo.rng_state()
  slapo.save_tensors(("%s/optimizer-rank%d.safetensors"):format(tmp, rank), state)
  if rank == 0 then
    write_file(tmp .. "/trainer.json", ('{"step": %d, "world_size": %d, "lr": %.17g}\n'):format(step, world,
      optimizer:lr()))
    write_file(tmp .. "/schedule.lua", log or "")
  end
  slapo.dist.barrier()
  if rank == 0 then
    local final = dir .. "/" .. name
    os.execute("rm -rf " .. shell_quote(final))
    assert(os.rename(tmp, final))
    write_file(dir .. "/latest.tmp", name .. "\n")
    assert(os.rename(dir .. "/latest.tmp", dir .. "/latest"))
  end
  slapo.dist.barrier()
  return dir .. "/" .. name
end

--- The newest complete checkpoint under `dir`, or nil.
function M.latest(dir)
  local name = read_file(dir .. "/latest")
  if not name then
    return nil
  end
  return dir .. "/" .. name:gsub("%s+$", "")
end

--- Loads a checkpoint into `model` and `optimizer` (and the random state); returns its step.
function M.load(path, model, optimizer)
  local trainer = read_file(path .. "/trainer.json")
  if not trainer then
    error(("resume: '%s' is not a checkpoint (no trainer.json)"):format(path), 2)
  end
  local step = tonumber(trainer:match('"step":%s*(%d+)'))
  local world = tonumber(trainer:match('"world_size":%s*(%d+)'))
  if world ~= slapo.dist.world_size() then
    error(("resume: '%s' was written by %d ranks, this run has %d"):format(path, world, slapo.dist.world_size()), 2)
  end
  local rank = slapo.dist.rank()
  model:load_state_dict((slapo.load_tensors(("%s/model-rank%d.safetensors"):format(path, rank))))
  local state = slapo.load_tensors(("%s/optimizer-rank%d.safetensors"):format(path, rank))
  local rng = state["rng.cpu"]
  state["rng.cpu"] = nil
  optimizer:load_state_tensors(model, state)
  slapo.set_rng_state(rng)
  return step
end

return M
