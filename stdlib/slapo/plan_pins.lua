--- The choices a schedule has already made, read from its log as the planner's pins:
--- `slapo.plan(sch, {...})` keeps them and searches the rest (docs/planner.md, "Plans around what
--- you pinned").
---   cut_pipeline_stage after layer i   -> pin.stages, each stage's layer count
---   checkpoint of whole layers         -> pin.checkpoint (all of them, or per pinned stage)
---   shard                              -> pin.tp: the schedule's group size (any tp >= 2 on one rank)
---   fully_shard{reshard_after_forward} -> pin.fully_shard, pin.reshard_after_forward (true unless false:
---                                         fully_shard's default, ZeRO-3)
--- Other primitives (replace, fuse, sync, ...) stay as applied and pin nothing; a checkpoint of part
--- of a layer is listed in `unpriced` (the planner prices whole layers).
local M = {}

-- The layer list's path and length: where the model family's reference schedule keeps it.
local function layer_list(sch)
  for _, family in ipairs({ "gpt2", "bert", "roberta", "opt", "llama" }) do  -- GPT-Neo keeps GPT-2's path
    local path = require("slapo.schedules." .. family).layers
    local ok, list = pcall(function() return sch[path] end)
    if ok and list then return path, #list:children() end
  end
  error("plan: the schedule's model has no layer list the planner knows (transformer.h, bert.encoder.layer, "
    .. "roberta.encoder.layer, model.decoder.layers, model.layers); give a zoo model's schedule (T5 and ALBERT are "
    .. "planned by name: slapo.plan(\"t5-small\", {...}))", 0)
end

-- The layer a path lies in (0-based) and whether the path is that whole layer.
local function layer_of(layers, path)
  local prefix = layers .. "."
  if path:sub(1, #prefix) ~= prefix then return nil end
  local index, rest = path:sub(#prefix + 1):match("^(%d+)(.*)$")
  if not index then return nil end
  return tonumber(index), rest == ""
end

-- Each stage's layer count from the layers a stage ends after.
local function stage_sizes(cuts, count, layers)
  table.sort(cuts)
  local sizes, start = {}, 0
  for i, last in ipairs(cuts) do
    if last == count - 1 then
      error(("plan: the schedule cuts a pipeline stage after %s.%d, the last layer: that ends no stage"):format(layers,
        last), 0)
    end
    if i == 1 or last ~= cuts[i - 1] then
      sizes[#sizes + 1] = last + 1 - start
      start = last + 1
    end
  end
  sizes[#sizes + 1] = count - start
  return sizes
end

-- pin.checkpoint from the checkpointed layers: every one (true), or each pinned stage's (all of its
-- layers, or none); nil when none is.
local function checkpointing(checkpointed, count, sizes, layers)
  local n = 0
  for _ in pairs(checkpointed) do n = n + 1 end
  if n == 0 then return nil end
  if n == count then return true end
  local some = {}
  for i in pairs(checkpointed) do some[#some + 1] = i end
  table.sort(some)
  local advice = ("plan: the schedule checkpoints %d of %s's %d layers (%s); the planner checkpoints every layer of "
    .. "a stage or none: checkpoint all of a stage's layers or none of them%s"):format(n, layers, count,
      table.concat(some, ", "), #sizes > 1 and "" or ", or cut stages where the checkpointing changes")
  if #sizes == 1 then error(advice, 0) end
  local per_stage, start = {}, 0
  for s, size in ipairs(sizes) do
    local inside = 0
    for i = start, start + size - 1 do
      if checkpointed[i] then inside = inside + 1 end
    end
    if inside ~= 0 and inside ~= size then error(advice, 0) end
    per_stage[s] = inside == size
    start = start + size
  end
  return per_stage
end

--- pin, unpriced = from_schedule(sch): the pins `sch`'s primitives make, and the primitives
--- applied that the planner does not price (strings naming them and where).
function M.from_schedule(sch)
  local layers, count = layer_list(sch)
  local pin, unpriced, cuts, checkpointed = {}, {}, {}, {}
  for _, entry in ipairs(sch:log_entries()) do
    local index, whole = layer_of(layers, entry.path)
    local where = entry.path == "" and "the model" or entry.path
    if entry.primitive == "cut_pipeline_stage" then
      if not (index and whole) then
        error(("plan: the schedule cuts a pipeline stage after %s (%s); the planner cuts stages only between the "
          .. "layers of %s"):format(where, entry.source, layers), 0)
      end
      cuts[#cuts + 1] = index
    elseif entry.primitive == "checkpoint" then
      if index and whole and #entry.args == 0 then checkpointed[index] = true
      else unpriced[#unpriced + 1] = ("checkpoint of %s (%s): part of a layer"):format(where, entry.source) end
    elseif entry.primitive == "shard" then
      pin.tp = sch.world_size > 1 and sch.world_size or true
    elseif entry.primitive == "fully_shard" then
      -- fully_shard's default reshards after forward (ZeRO-3); only an explicit false keeps the
      -- weights gathered (ZeRO-2), and the planner prices one of them for every layer
      local reshard = not (entry.args[1] or ""):match("reshard_after_forward%s*=%s*false")
      if pin.fully_shard and pin.reshard_after_forward ~= reshard then
        error(("plan: the schedule calls fully_shard with reshard_after_forward = %s on %s (%s) and %s before it; "
          .. "the planner prices one setting for every layer: give every fully_shard call the same"):format(
            tostring(reshard), where, entry.source, tostring(pin.reshard_after_forward)), 0)
      end
      pin.fully_shard, pin.reshard_after_forward = true, reshard
    end
  end
  local sizes = stage_sizes(cuts, count, layers)
  if #sizes > 1 then pin.stages = sizes end
  pin.checkpoint = checkpointing(checkpointed, count, sizes, layers)
  return pin, unpriced
end

--- pin, unpriced = from_file(model, path): the pins of the schedule file `path` (`slapo-lua plan MODEL
--- --from FILE`). The file returns `function(sch, args) ... end`, the form `sch:log()` writes; it is
--- applied to MODEL (a preset name or a Hugging Face directory) built on the meta device.
function M.from_file(model, path)
  local chunk, why = loadfile(path)
  if not chunk then error(("plan: --from %s: %s"):format(path, why), 0) end
  local form = "return function(sch, args) ... end with the primitives inside (the form sch:log() writes), e.g. "
    .. "return function(sch) sch[\"transformer.h.0\"]:fully_shard() end"
  local ran, apply = pcall(chunk)
  if not ran then
    error(("plan: --from %s failed as it loaded (%s); a schedule file must %s"):format(path, tostring(apply), form), 0)
  end
  if type(apply) ~= "function" then
    error(("plan: --from %s returned %s; a schedule file must %s"):format(path, type(apply), form), 0)
  end
  local config = io.open(model .. "/config.json", "r")
  if config then config:close() end
  local built = config and slapo.models.from_pretrained(model, { device = "meta" })
    or slapo.models.build(model, { device = "meta" })
  local sch = slapo.create_schedule(built)
  apply(sch, {})
  return M.from_schedule(sch)
end

--- The schedule's pins with `given` (slapo.plan's own `pin` option) laid over them: what the user
--- says by hand wins.
function M.merge(from_schedule, given)
  local pin = {}
  for key, value in pairs(from_schedule) do pin[key] = value end
  for key, value in pairs(given or {}) do pin[key] = value end
  return pin
end

return M
