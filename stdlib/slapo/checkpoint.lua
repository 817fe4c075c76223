--- Training checkpoints: the model, the optimizer state, the random streams, the step and the losses
--- so far, in safetensors + JSON, written into a temporary directory, fsync'ed, and renamed into
--- place, so a kill at any point of a save never loses the last good checkpoint and `latest` always
--- names a complete one.
---
--- Layout:  DIR/step-000100/{model-rank0.safetensors, optimizer-rank0.safetensors, trainer.json, schedule.lua}
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

local function sh(command)
  return os.execute(command) == 0
end

local function exists(path)
  return sh("test -e " .. shell_quote(path))
end

--- Creates `dir` (rank 0) before any step trains, so a directory that cannot be made is refused
--- while the model is as it was, not after a step.
function M.prepare(dir)
  if slapo.dist.rank() == 0 and not sh("mkdir -p " .. shell_quote(dir) .. " 2>/dev/null && test -w " .. shell_quote(dir)) then
    error(("train: checkpoint_dir = '%s' cannot be created or written"):format(dir), 0)
  end
end

--- Test hook: called with the name of each point of a save where a kill could land
--- (tests/lua/train_spec.lua kills the process there).
M.on_point = nil

local function point(name)
  if M.on_point then
    M.on_point(name)
  end
end

-- Flushes shell words naming files (and directories: their entries) to the disk, so a rename
-- never makes a name point at data still in the page cache. GNU sync takes files; where sync takes
-- none, the whole cache.
local function sync_words(words)
  if not sh("sync -- " .. words .. " 2>/dev/null") then
    sh("sync 2>/dev/null")
  end
end

local function fsync(paths)
  local quoted = {}
  for _, p in ipairs(paths) do
    table.insert(quoted, shell_quote(p))
  end
  sync_words(table.concat(quoted, " "))
end

-- Renames and flushes the directory holding both names (the rename itself is then on the disk).
local function move(from, to, dir)
  assert(os.rename(from, to))
  fsync({ dir })
end

local function write_latest(dir, name)
  write_file(dir .. "/latest.tmp", name .. "\n")
  fsync({ dir .. "/latest.tmp" })
  move(dir .. "/latest.tmp", dir .. "/latest", dir)
end

local function latest_name(dir)
  local name = read_file(dir .. "/latest")
  return name and name:gsub("%s+$", "")
end

-- Puts the complete `.NAME.tmp` in place as NAME. A directory cannot be renamed over a full one,
-- so a re-saved step first gets a second name for its new files (hard links, or copies where the
-- file system has none) that `latest` names while the old directory moves aside; every moment
-- `latest` names a complete directory.
local function install(dir, name)
  local tmp, final = ("%s/.%s.tmp"):format(dir, name), dir .. "/" .. name
  local new, old = ("%s/.%s.new"):format(dir, name), ("%s/.%s.old"):format(dir, name)
  if exists(final) then
    if latest_name(dir) ~= "." .. name .. ".new" then  -- else a cut re-save left it complete and named
      local q_new, q_tmp = shell_quote(new), shell_quote(tmp)
      assert(sh(("rm -rf %s && mkdir %s && { ln %s/* %s/ 2>/dev/null || cp -p %s/* %s/; }"):format(q_new, q_new, q_tmp,
        q_new, q_tmp, q_new)), "checkpoint: cannot fill " .. new)
      sync_words(q_new .. "/* " .. q_new)
      point("linked")
      write_latest(dir, "." .. name .. ".new")
      point("latest names the new files")
    end
    assert(sh("rm -rf " .. shell_quote(old)), "checkpoint: cannot remove " .. old)
    move(final, old, dir)
    point("old moved aside")
  end
  move(tmp, final, dir)
  point("new in place")
  write_latest(dir, name)
  point("latest names the step")
  -- what cut saves left (latest names none of it now): moved-aside, second-name and partial directories
  local q = shell_quote(dir)
  sh(("rm -rf %s/.step-*.old %s/.step-*.new %s/.step-*.tmp"):format(q, q, q))
end

-- The random streams a run draws from: the default CPU stream, each CUDA device's, the named
-- streams of slapo.random's tracker, and the streams fork_rng gave modules of the model (dropout
-- under tensor parallelism: "rng.module.<path>").
local function rng_tensors(model)
  local out = { ["rng.cpu"] = slapo.rng_state() }
  for device, state in ipairs(slapo.cuda_rng_states()) do
    out["rng.cuda." .. (device - 1)] = state
  end
  for name, state in pairs(require("slapo.random").get_tracker():get_states()) do
    out["rng.tracker." .. name] = state
  end
  for path, state in pairs(model:rng_states()) do
    out["rng.module." .. path] = state
  end
  return out
end

-- Takes the random streams out of a loaded state table and sets them.
local function restore_rng(state, model)
  local tracker = require("slapo.random").get_tracker()
  local streams, modules, cuda = tracker:get_states(), {}, {}
  local names = {}
  for key in pairs(state) do
    table.insert(names, key)
  end
  for _, key in ipairs(names) do
    local stream = key:match("^rng%.tracker%.(.+)$")
    local path = key:match("^rng%.module%.(.*)$")
    local device = key:match("^rng%.cuda%.(%d+)$")
    if stream then
      streams[stream] = state[key]
    elseif path then
      modules[path] = state[key]
    elseif device then
      cuda[tonumber(device) + 1] = state[key]
    end
    if stream or path or device then
      state[key] = nil
    end
  end
  model:set_rng_states(modules)
  tracker:set_states(streams)
  -- a run resumed on fewer devices than it saved (or on the CPU) sets the devices it has
  local devices = #slapo.cuda_rng_states()
  slapo.set_cuda_rng_states({ unpack(cuda, 1, math.min(#cuda, devices)) })
  slapo.set_rng_state(state["rng.cpu"])
  state["rng.cpu"] = nil
end

--- Saves a checkpoint of `step`; every rank calls it. `log` is the schedule log (Lua source);
--- `trainer` holds more fields for trainer.json (slapo.train's losses so far, the float16 loss
--- scaler's state).
function M.save(dir, step, model, optimizer, log, trainer)
  local rank, world = slapo.dist.rank(), slapo.dist.world_size()
  local name = ("step-%06d"):format(step)
  local tmp = ("%s/.%s.tmp"):format(dir, name)
  if rank == 0 then
    assert(sh("rm -rf " .. shell_quote(tmp) .. " && mkdir -p " .. shell_quote(tmp)),
      "checkpoint: cannot create " .. tmp)
  end
  slapo.dist.barrier()
  local model_file = ("%s/model-rank%d.safetensors"):format(tmp, rank)
  local optimizer_file = ("%s/optimizer-rank%d.safetensors"):format(tmp, rank)
  slapo.save_tensors(model_file, model:state_dict())
  local state = optimizer:state_tensors(model)
  for key, t in pairs(rng_tensors(model)) do
    state[key] = t
  end
  slapo.save_tensors(optimizer_file, state)
  fsync({ model_file, optimizer_file })
  if rank == 0 then
    local fields = { step = step, world_size = world, lr = optimizer:lr() }
    for k, v in pairs(trainer or {}) do
      fields[k] = v
    end
    write_file(tmp .. "/trainer.json", slapo.json_encode(fields) .. "\n")
    write_file(tmp .. "/schedule.lua", log or "")
    fsync({ tmp .. "/trainer.json", tmp .. "/schedule.lua", tmp })
  end
  slapo.dist.barrier()
  if rank == 0 then
    point("written")
    install(dir, name)
  end
  slapo.dist.barrier()
  return dir .. "/" .. name
end

--- The newest complete checkpoint under `dir`, or nil.
function M.latest(dir)
  local name = latest_name(dir)
  return name and dir .. "/" .. name
end

--- Loads a checkpoint into `model` and `optimizer` (and the random streams); returns its step and
--- the fields of its trainer.json.
function M.load(path, model, optimizer)
  local text = read_file(path .. "/trainer.json")
  if not text then
    error(("resume: '%s' is not a checkpoint (no trainer.json)"):format(path), 2)
  end
  local trainer = slapo.json_decode(text)
  if trainer.world_size ~= slapo.dist.world_size() then
    error(("resume: '%s' was written by %s ranks, this run has %d"):format(path, tostring(trainer.world_size),
      slapo.dist.world_size()), 2)
  end
  local rank = slapo.dist.rank()
  model:load_state_dict((slapo.load_tensors(("%s/model-rank%d.safetensors"):format(path, rank))))
  local state = slapo.load_tensors(("%s/optimizer-rank%d.safetensors"):format(path, rank))
  restore_rng(state, model)
  optimizer:load_state_tensors(model, state)
  return trainer.step, trainer
end

return M
