--- Training checkpoints: the model, the optimizer state, the random streams, the step and the losses
--- so far, in safetensors + JSON, written into a temporary directory, fsync'ed, and renamed into
--- place, so a kill at any point of a save never loses the last good checkpoint and `latest` always
--- names a complete one.
---
--- Layout:  DIR/step-000100/{model-rank0.safetensors, optimizer-rank0.safetensors, rng-rank0.safetensors,
---                             index.json, trainer.json, schedule.lua}
---          DIR/latest  (the name of the newest complete checkpoint)
---
--- Each rank writes the slices it holds as pieces that know their place in the whole tensor, and
--- index.json lists them all (src/io/sharded_checkpoint.h), so a checkpoint written on one layout
--- resumes on another: other ranks, tensor-parallel, fully sharded or whole. zero_adamw's moments
--- are flat slices of its own and resume only on as many ranks as wrote them. A pipeline's ranks
--- write their stages' state, which the pipeline, or the whole model as a module, reads back. Each
--- rng file's metadata lists the parameters whose optimizer state its rank held, which a resume on
--- as many ranks finds in the pieces it reads or refuses by name.
local M = {}

local util = require("slapo.util")
local read_file, write_file = util.read_file, util.write_file

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
  -- streams of modules this model does not fork (another layout wrote them: a tensor-parallel
  -- checkpoint read into a whole model) are left out, and named; its own modules' streams are set
  local own, dropped = model:rng_states(), {}
  for path in pairs(modules) do
    if own[path] == nil then table.insert(dropped, path) end
  end
  table.sort(dropped)
  for _, path in ipairs(dropped) do modules[path] = nil end
  if #dropped > 0 then
    print(("resume: %d random stream(s) of modules this model does not fork_rng are left out (%s%s)"):format(
      #dropped, dropped[1], #dropped > 1 and ", ..." or ""))
  end
  model:set_rng_states(modules)
  tracker:set_states(streams)
  -- a run resumed on fewer devices than it saved (or on the CPU) sets the devices it has
  local devices = #slapo.cuda_rng_states()
  slapo.set_cuda_rng_states({ unpack(cuda, 1, math.min(#cuda, devices)) })
  slapo.set_rng_state(state["rng.cpu"])
  state["rng.cpu"] = nil
end

local function is_zero(optimizer)
  return getmetatable(optimizer) == debug.getregistry()["slapo.ZeroOptimizer"]
end

local is_pipeline = util.is_pipeline

-- The parameter an optimizer state name is of ("h.0.weight" of "h.0.weight.exp_avg"), or nil.
local function parameter_of(state_name)
  return state_name:match("^(.*)%.[^.]+$")
end

-- What a rank saves and loads of `model`, a module or a pipeline: the module, its state to write,
-- the names of that state and of the parameters whose optimizer state it holds (nil: all), and
-- whether to leave out an optimizer state name. A pipeline rank holds the state under the modules
-- its stages call and its stages' parameters outside them. A weight tied across stages is saved
-- under each name its stages use (GPT-2's transformer.wte.weight by the first, lm_head.weight by
-- the last), as a whole model's state_dict names it twice; its optimizer state by the first stage.
local function rank_part(model)
  if not is_pipeline(model) then
    return { module = model, state = model:state_dict() }
  end
  local elsewhere = {}
  for _, name in ipairs(model:shared_counted_elsewhere()) do elsewhere[name] = true end
  local leaves, state, names, params = model:leaves(), {}, {}, {}
  for name, t in pairs(model.module:state_dict()) do
    for _, leaf in ipairs(leaves) do
      if name:sub(1, #leaf + 1) == leaf .. "." then
        state[name] = t
        break
      end
    end
  end
  for name, p in model:named_parameters() do
    table.insert(params, name)
    if not elsewhere[name] and not state[name] then state[name] = p end
  end
  for name in pairs(state) do table.insert(names, name) end
  table.sort(names)
  return { module = model.module, state = state, names = names, params = params,
    saved_elsewhere = function(state_name)
      local param = parameter_of(state_name)
      return param and elsewhere[param] or false
    end }
end

-- The optimizer state a rank writes: a pipeline's without what another stage writes, unless some
-- ranks write zero_adamw's flat slices instead (`all_pieces` false: stage meshes, ZeRO-1 on some
-- stages), where the stage that counts a tied weight may keep its state in them.
local function optimizer_part(optimizer, part, all_pieces)
  local state = optimizer:state_tensors(part.module)
  if part.saved_elsewhere and all_pieces then
    for name in pairs(state) do
      if part.saved_elsewhere(name) then state[name] = nil end
    end
  end
  return state
end

local RANK_FILES = { "model", "optimizer", "rng" }

-- What to do about a checkpoint that is incomplete or damaged.
local RESUME_ADVICE = "resume from another checkpoint (the directory holds one a step; `latest` names the newest), "
  .. "or start afresh with resume = false"

-- The parameters whose optimizer state `optimizer` holds on this rank, by name ("" for zero_adamw,
-- whose flat slices are checked by their sizes), as a newline-separated list: the rng file's
-- metadata, which a resume checks the pieces it reads against.
local function stateful_parameters(optimizer, module)
  if is_zero(optimizer) then return "" end
  local seen, names = {}, {}
  for key in pairs(optimizer:state_tensors(module)) do
    local param = parameter_of(key)
    if param and not seen[param] then
      seen[param] = true
      table.insert(names, param)
    end
  end
  table.sort(names)
  return table.concat(names, "\n")
end

-- The first parameter this rank holds now (`part`: rank_part's) and held optimizer state for when it
-- wrote the checkpoint (`saved`, stateful_parameters' list; nil for a checkpoint written before it
-- was recorded) that `state`, the optimizer state a resume read, lacks; nil when none. A writer that
-- left one out would otherwise restart that parameter's moments in silence.
local function missing_optimizer_state(state, saved, part)
  if not saved or saved == "" then return nil end
  local have, held = {}, {}
  for key in pairs(state) do
    local param = parameter_of(key)
    if param then have[param] = true end
  end
  if part.params then
    for _, name in ipairs(part.params) do held[name] = true end
  else
    for name in part.module:named_parameters() do held[name] = true end
  end
  for param in saved:gmatch("[^\n]+") do
    if held[param] and not have[param] then return param end
  end
  return nil
end

-- Raises on every rank, before anything is loaded, when a rank's optimizer state lacks a parameter
-- (`missing`, this rank's, or nil): that rank names it, the others name that rank.
local function refuse_missing_state(path, missing, rank, world)
  local flags = {}
  for r = 1, world do flags[r] = 0 end
  flags[rank + 1] = missing and 1 or 0
  local summed = slapo.tensor(flags, { dtype = "float64" })
  if world > 1 then slapo.dist.all_reduce(summed) end
  local first
  for r, flag in ipairs(summed:tolist()) do
    if flag > 0 then
      first = r - 1
      break
    end
  end
  if not first then return end
  local what = missing and ("'%s', which rank %d held when it wrote the checkpoint"):format(missing, rank)
    or ("a parameter rank %d held when it wrote the checkpoint (rank %d names it)"):format(first, first)
  error(("resume: '%s' holds no optimizer state for %s: the checkpoint is incomplete; %s"):format(path, what,
    RESUME_ADVICE), 0)
end

-- {file = CRC-32} of every rank's files, for trainer.json: each rank checksums the files it has just
-- written (so no rank reads the whole checkpoint again) and the ranks sum their slots of one tensor.
local function rank_file_checksums(files)
  local world, rank = slapo.dist.world_size(), slapo.dist.rank()
  local slots = {}
  for i = 1, world * #RANK_FILES do slots[i] = 0 end
  for k, kind in ipairs(RANK_FILES) do
    slots[rank * #RANK_FILES + k] = tonumber(slapo._crc32_file(files[kind]), 16)  -- exact in a double
  end
  local summed = slapo.tensor(slots, { dtype = "float64" })
  if world > 1 then slapo.dist.all_reduce(summed) end
  local out, values = {}, summed:tolist()
  for r = 0, world - 1 do
    for k, kind in ipairs(RANK_FILES) do
      out[("%s-rank%d.safetensors"):format(kind, r)] = ("%08x"):format(values[r * #RANK_FILES + k])
    end
  end
  return out
end

-- Raises, naming the file, unless every file trainer.json lists is there with the checksum it
-- recorded. The ranks share the reading (file i on rank i mod world) and agree on the first file
-- that fails, so every rank raises the same message.
local function verify_files(path, recorded)
  local names = {}
  for name in pairs(recorded) do table.insert(names, name) end
  table.sort(names)
  local world, rank = slapo.dist.world_size(), slapo.dist.rank()
  local mine = {}  -- 0: fine (or another rank's), 1: missing, 2: changed
  for i, name in ipairs(names) do
    mine[i] = 0
    if (i - 1) % world == rank then
      local file = path .. "/" .. name
      mine[i] = not exists(file) and 1 or slapo._crc32_file(file) ~= recorded[name] and 2 or 0
    end
  end
  local failed = slapo.tensor(mine)
  if world > 1 then slapo.dist.all_reduce(failed) end
  local states = failed:tolist()
  for i, name in ipairs(names) do
    if states[i] == 1 then
      error(("resume: '%s' lacks %s, which its trainer.json lists: the checkpoint is incomplete; %s"):format(path, name,
        RESUME_ADVICE), 0)
    elseif states[i] == 2 then
      error(("resume: %s/%s is not the file that was saved (its CRC-32 differs from the %s trainer.json recorded): "
        .. "it changed or was damaged after the save; %s"):format(path, name, recorded[name], RESUME_ADVICE), 0)
    end
  end
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
  local files = {
    model = ("%s/model-rank%d.safetensors"):format(tmp, rank),
    optimizer = ("%s/optimizer-rank%d.safetensors"):format(tmp, rank),
    rng = ("%s/rng-rank%d.safetensors"):format(tmp, rank),
  }
  local part = rank_part(model)
  -- which ranks run zero_adamw: all, none, or (stages on meshes of their own) each stage its choice
  local zero_ranks = {}
  for r, flag in ipairs(slapo.dist.all_gather(slapo.tensor({ is_zero(optimizer) and 1 or 0 })):tolist()) do
    if flag > 0 then table.insert(zero_ranks, r - 1) end
  end
  slapo._write_pieces(part.module, files.model, part.state)
  if is_zero(optimizer) then  -- its own flat slices: saved as they are
    slapo.save_tensors(files.optimizer, optimizer:state_tensors(part.module))
  else
    slapo._write_pieces(part.module, files.optimizer, optimizer_part(optimizer, part, #zero_ranks == 0))
  end
  slapo.save_tensors(files.rng, rng_tensors(part.module),
    { optimizer_state = stateful_parameters(optimizer, part.module) })
  fsync({ files.model, files.optimizer, files.rng })
  local checksums = rank_file_checksums(files)  -- a collective: every rank's files are written after it
  if rank == 0 then
    local pieces = {}
    local zero = {}
    for _, r in ipairs(zero_ranks) do zero[r] = true end
    for r = 0, world - 1 do
      table.insert(pieces, ("model-rank%d.safetensors"):format(r))
      if not zero[r] then
        table.insert(pieces, ("optimizer-rank%d.safetensors"):format(r))
      end
    end
    slapo._write_piece_index(tmp, pieces)
    write_file(tmp .. "/schedule.lua", log or "")
    for _, name in ipairs({ "index.json", "schedule.lua" }) do
      checksums[name] = slapo._crc32_file(tmp .. "/" .. name)
    end
    local fields = { step = step, world_size = world, lr = optimizer:lr(), zero_optimizer = #zero_ranks > 0,
      zero_ranks = #zero_ranks > 0 and #zero_ranks < world and zero_ranks or nil, files = checksums }
    for k, v in pairs(trainer or {}) do
      fields[k] = v
    end
    write_file(tmp .. "/trainer.json", slapo.json_encode(fields) .. "\n")
    fsync({ tmp .. "/index.json", tmp .. "/trainer.json", tmp .. "/schedule.lua", tmp })
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

-- A checkpoint written before pieces (no index.json): each rank's whole files, same layout only.
local function load_rank_files(path, model, optimizer)
  local rank = slapo.dist.rank()
  model:load_state_dict((slapo.load_tensors(("%s/model-rank%d.safetensors"):format(path, rank))))
  local state = slapo.load_tensors(("%s/optimizer-rank%d.safetensors"):format(path, rank))
  restore_rng(state, model)
  optimizer:load_state_tensors(model, state)
end

--- Loads a checkpoint into `model` and `optimizer` (and the random streams); returns its step and
--- the fields of its trainer.json. Each rank reads its slices of every tensor for this model's
--- layout, whatever layout wrote them.
function M.load(path, model, optimizer)
  local text = read_file(path .. "/trainer.json")
  if not text then
    error(("resume: '%s' is not a checkpoint (no trainer.json)"):format(path), 2)
  end
  local trainer = slapo.json_decode(text)
  if trainer.files then
    verify_files(path, trainer.files)
  elseif exists(path .. "/rng-rank0.safetensors") and not exists(path .. "/index.json") then
    -- written with pieces before checkpoints recorded their files: index.json is what is missing
    error(("resume: '%s' lacks index.json, the list of every rank's pieces its model and optimizer files hold: the "
      .. "checkpoint is incomplete; %s"):format(path, RESUME_ADVICE), 2)
  end
  local world, rank = slapo.dist.world_size(), slapo.dist.rank()
  local same_world = trainer.world_size == world
  local pieces = exists(path .. "/index.json")
  if not same_world and (not pieces or trainer.zero_optimizer) then
    error(("resume: '%s' was written by %s ranks, this run has %d%s"):format(path, tostring(trainer.world_size), world,
      pieces and " (zero_adamw's moments are flat slices of its own: resume it on as many ranks, or train on "
        .. "with optimizer = \"adamw\" from the weights alone)" or ""), 2)
  end
  local part = rank_part(model)
  if not pieces then
    if part.names then
      error(("resume: '%s' was written before checkpoints held pieces, which a pipeline's stages read theirs from")
        :format(path), 2)
    end
    load_rank_files(path, model, optimizer)
    return trainer.step, trainer
  end
  local module = part.module
  local weights = slapo._read_pieces(path, "model", module, part.names)
  -- zero_adamw's flat slices where this rank wrote them (zero_ranks: the ranks that did, when not all)
  local zero_here = trainer.zero_optimizer
  if trainer.zero_ranks then
    zero_here = false
    for _, r in ipairs(trainer.zero_ranks) do zero_here = zero_here or r == rank end
  end
  local state = zero_here and slapo.load_tensors(("%s/optimizer-rank%d.safetensors"):format(path, rank))
    or slapo._read_pieces(path, "optimizer", module, part.params)
  -- the random streams are each rank's own: they carry over when the ranks are the same ones, and so
  -- does the list of parameters whose optimizer state the rank held
  local streams, meta
  if same_world then
    streams, meta = slapo.load_tensors(("%s/rng-rank%d.safetensors"):format(path, rank))
    refuse_missing_state(path, not zero_here and missing_optimizer_state(state, meta.optimizer_state, part) or nil,
      rank, world)
  end
  module:load_state_dict(weights)
  if same_world then
    restore_rng(streams, module)
  elseif rank == 0 then
    print(("resume: the random streams start afresh: '%s' was written by %d ranks, this run has %d"):format(path,
      trainer.world_size, world))
  end
  optimizer:load_state_tensors(module, state)
  return trainer.step, trainer
end

return M
