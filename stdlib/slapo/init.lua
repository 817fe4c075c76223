--- slapo: the schedule language. The C++ core (slapo.core) provides tensors, modules, models and
--- schedules; this file adds what is simpler in Lua.
---
--- Example usage:
---   local model = slapo.models.gpt2("gpt2")
---   local sch = slapo.create_schedule(model)
---   print(sch["transformer.h.0.attn"])
local core = require("slapo.core")

local slapo = {}
for name, value in pairs(core) do
  slapo[name] = value
end

slapo.nn = {}
for name, value in pairs(core.nn) do
  if name ~= "lua_module" then
    slapo.nn[name] = value
  end
end

--- A module written in Lua.
---   slapo.nn.Module{ type = "MyBlock", children = {fc = slapo.nn.Linear(4, 4)},
---                    params = {scale = slapo.ones{4}},
---                    forward = function(self, x) return slapo.F.relu(self.fc(x)) * self.scale end }
function slapo.nn.Module(spec)
  if type(spec) ~= "table" then
    error("nn.Module: expected a table {type=, children=, params=, forward=}, got " .. type(spec), 2)
  end
  local allowed = { type = true, children = true, params = true, forward = true }
  for key in pairs(spec) do
    if not allowed[key] then
      error(("nn.Module: unknown field '%s' (fields: type, children, params, forward)"):format(tostring(key)), 2)
    end
  end
  if type(spec.forward) ~= "function" then
    error("nn.Module: 'forward' must be a function(self, ...), got " .. type(spec.forward), 2)
  end
  if spec.type ~= nil and type(spec.type) ~= "string" then
    error("nn.Module: 'type' must be a string, got " .. type(spec.type), 2)
  end
  return core.nn.lua_module(spec.type or "LuaModule", spec.children or {}, spec.params or {}, spec.forward)
end

-- verify's check of a schedule against its reference, plain or (opts.pipeline) cut into stages.
local function check_schedule(sch, reference, inputs, opts)
  if opts.pipeline then
    local pipe = slapo.build(sch, { pipeline = opts.pipeline })
    local checks = {}
    for k, v in pairs(opts) do
      if k ~= "pipeline" then
        checks[k] = v
      end
    end
    return core._verify_pipeline(pipe, reference, inputs, checks), pipe
  end
  return core._verify(sch, reference, inputs, opts)
end

--- Checks a schedule against the unscheduled model: outputs and (gathered) gradients.
---   slapo.verify(sch, {ids}, {rtol = 1e-5, atol = 1e-6, backward = true}, function(sch) ... end)
--- `fn` applies the primitives to check; without it the schedule's current state is compared
--- with a copy taken now (which then only checks that forward and backward run alike).
--- Returns a report {outputs=, params=, gradients=, no_gradient=, skipped_params=, skipped=,
--- max_output_diff=, max_grad_diff=}; raises on mismatch. A scheduled parameter with no
--- counterpart of its name in the original is an error unless {allow_missing = {name, ...}} (or
--- true) lets verify go on without its gradient; those are counted and named in the report.
--- With {pipeline = {group =, micro_batches =, ...}} (slapo.build's pipeline options) the
--- schedule, cut into stages, is built into a pipeline whose step (every micro-batch, forward and
--- backward) is compared with the unscheduled model: the loss on {labels =} (default: the first
--- input) and each stage's gradients. Then it returns the report and the pipeline.
--- When the check fails, or `fn` raises, the primitives `fn` applied are rolled back (module
--- objects restored in place, so handles stay valid) and the error says so.
function slapo.verify(sch, inputs, opts, fn)
  if type(sch) ~= "userdata" or getmetatable(sch).__name ~= "slapo.Schedule" then
    local got = type(sch) == "userdata" and getmetatable(sch).__name == "slapo.Module"
      and "a module (pass slapo.create_schedule(model))" or type(sch)
    error(("verify: bad argument #1: schedule expected, got %s"):format(got), 2)
  end
  if type(opts) == "function" then
    opts, fn = nil, opts
  end
  if fn ~= nil and type(fn) ~= "function" then
    error(("verify: bad argument #4: a function(sch) that applies the primitives to check, got %s"):format(type(fn)), 2)
  end
  if inputs == nil then
    error("verify: bad argument #2: the model's inputs (a tensor or an array of them) are required", 2)
  end
  if type(inputs) ~= "table" or slapo.is_tensor(inputs) then
    inputs = { inputs }
  end
  opts = opts or {}
  local reference = sch.mod:clone()
  if not fn then
    return check_schedule(sch, reference, inputs, opts)
  end
  -- A schedule that fails its check (or whose fn raises) goes back to how it was before fn.
  local snapshot, args_before = core._schedule_snapshot(sch), #sch:log_args()
  local results = { pcall(function()
    fn(sch)
    return check_schedule(sch, reference, inputs, opts)
  end) }
  if results[1] then
    return unpack(results, 2)
  end
  local undone = snapshot:restore()
  local args = sch:log_args()
  for i = #args, args_before + 1, -1 do
    args[i] = nil
  end
  local err = results[2]
  if type(err) ~= "string" or undone == 0 then
    error(err, 0)
  end
  error(("%s\nverify: rolled back the %d primitive%s fn applied; the schedule, its log and the model are as before verify")
    :format(err, undone, undone == 1 and "" or "s"), 0)
end

--- slapo.train{model =, data =, steps =, ...}: see stdlib/slapo/train.lua.
function slapo.train(opts)
  return require("slapo.train").run(opts)
end

--- Runs fn(...) with layers and zoo models made on the meta device: shapes only, no memory and no
--- initialisation (Slapo's init_empty_weights). Schedule them, then slapo.build(sch) materialises
--- each rank's shard and initialises it (HF's rules for zoo models, each layer's PyTorch rule
--- otherwise, or build's init_weights function). Returns fn's results.
function slapo.init_empty_weights(fn, ...)
  if type(fn) ~= "function" then
    error("init_empty_weights: expected a function that builds the model, got " .. type(fn), 2)
  end
  local function pack(...)
    return { n = select("#", ...), ... }
  end
  local before = core._set_empty_weights(true)
  local results = pack(pcall(fn, ...))
  core._set_empty_weights(before)
  if not results[1] then
    error(results[2], 0)
  end
  return unpack(results, 2, results.n)
end

--- The planner's intra-op pass on a layer or a whole model: which projections go column- or
--- row-parallel over `ranks` on a ranks x `dp` mesh, under `memory_mib` per device, with or without
--- ZeRO-1 (`zero`), solved as Alpa's ILP (slapo.ilp_solver names the solver), as a Lua schedule.
---   local p = slapo.autoshard(sch["transformer.h.0"], {ranks = 2, dp = 4, batch = 8, seq = 512})
---   print(p.source); for _, layer in ipairs(sch["transformer.h"]:children()) do p:apply(layer) end
function slapo.autoshard(sch, opts)
  local plan = core._autoshard(sch, opts)  -- the pass's record; its calls are written here
  plan.source = require("slapo.layer_layout").autoshard_source(plan)
  local chunk = assert(load(plan.source, "=autoshard"))()
  function plan:apply(layer_sch)
    chunk(layer_sch)
    return layer_sch
  end
  return plan
end

--- The planner (`slapo-lua plan`'s search) on a preset name, a Hugging Face directory or a zoo model:
--- the chosen plan's fields, `alternatives`, `unrestricted`, `source` (the plan script), `summary`
--- (tostring), and `record`, the planner's own data that stdlib/slapo/plan_script.lua wrote it from.
---   local p = slapo.plan("gpt2", {cluster = "1x8:h100", batch = 16, seq = 1024})
---   print(p); print(p.source)
function slapo.plan(model, opts)
  local unpriced
  if getmetatable(model) == debug.getregistry()["slapo.Schedule"] then
    -- a schedule: the choices its primitives made are pins (stdlib/slapo/plan_pins.lua)
    if model.path ~= "" then
      error(("plan: give the model's schedule (sch), not the one of %s"):format(model.path), 2)
    end
    local pins = require("slapo.plan_pins")
    local pin
    pin, unpriced = pins.from_schedule(model)
    opts = opts or {}
    if type(opts) ~= "table" then error("plan: options must be a table, got " .. type(opts), 2) end
    local given = opts.pin
    if given == nil or type(given) == "table" then
      local copy = {}
      for key, value in pairs(opts) do copy[key] = value end
      copy.pin, opts = pins.merge(pin, given), copy
    end
    model = model.mod
  end
  local record = core._plan(model, opts)
  local plan = {}
  for key, value in pairs(record.ranked[1]) do plan[key] = value end
  plan.alternatives, plan.unrestricted = record.ranked, record.unrestricted[1]
  plan.source = require("slapo.plan_script").write(record)
  plan.summary, plan.layer_layout = record.summary, record.layer_layout_note
  plan.ranks, plan.parameters = record.cluster.devices, record.model.parameters
  plan.search_s, plan.trace_s = record.search_s, record.trace_s
  plan.record = record
  plan.pins, plan.unpinned, plan.unpriced = record.pins, record.unpinned, unpriced
  return setmetatable(plan, { __tostring = function(p) return p.summary end })
end

--- Tunable knobs and trial reports (stdlib/slapo/knobs.lua; `slapo-lua tune` drives them).
local knobs = require("slapo.knobs")
slapo.knob, slapo.knobs, slapo.report, slapo.predict = knobs.knob, knobs.knobs, knobs.report, knobs.predict

--- Named random streams (Megatron's RNG tracker): stdlib/slapo/random.lua.
slapo.random = require("slapo.random")

slapo.op = setmetatable({}, { __index = function(_, name) return require("slapo.op")[name] end })

--- slapo.help([name]) describes a primitive or a function around them; slapo.list_primitives() names the primitives.
function slapo.help(name)
  return require("slapo.help").help(name)
end

--- A module whose forward calls fn(...) (replace(fn, subgraph) passes functions through it).
function slapo._function_module(fn)
  return slapo.nn.Module({ type = "Function", forward = function(_, ...) return fn(...) end })
end

function slapo.list_primitives()
  return require("slapo.help").list()
end

--- Replaces every descendant whose type is `type_name` with make_fn(path, module); all new
--- modules are made before any is swapped in, so a failing make_fn changes nothing.
local schedule_methods = debug.getregistry()["slapo.Schedule"].methods
-- The log names the knob values the run used (a comment: it still replays as it did).
local core_log = schedule_methods.log
function schedule_methods.log(sch)
  local text = core_log(sch)
  local declared = knobs.knobs()
  if #declared == 0 then
    return text
  end
  local order = {}
  for _, k in ipairs(declared) do
    table.insert(order, k.name)
  end
  return "-- knobs: " .. knobs.config_text(knobs.values(), order) .. "\n" .. text
end

function schedule_methods.replace_all(sch, type_name, make_fn)
  if type(type_name) ~= "string" then
    error("replace_all: type name must be a string, got " .. type(type_name), 2)
  end
  if type(make_fn) ~= "function" then
    error(("replace_all: make_fn must be a function(path, module) returning the new module, got %s%s"):format(
      require("slapo.util").describe(make_fn),
      type(make_fn) == "userdata" and " (wrap it: function(path, old) return slapo.nn.Identity() end)" or ""), 2)
  end
  local targets, types = {}, {}
  for path, sub in sch:named_schedules() do
    if sub.mod:type() == type_name then
      table.insert(targets, sub)
    end
    types[sub.mod:type()] = true
  end
  if #targets == 0 then  -- a misspelt type would otherwise replace nothing, silently
    local names = {}
    for name in pairs(types) do table.insert(names, name) end
    table.sort(names)
    local where = sch.path == "" and "the model" or ("'" .. sch.path .. "'")
    error(("replace_all: no module of type '%s' under %s (its types: %s)"):format(type_name, where,
      table.concat(names, ", ")), 2)
  end
  local replacements = {}
  for i, sub in ipairs(targets) do
    local ok, new = pcall(make_fn, sub.path, sub.mod)
    if not ok then  -- nothing has been swapped yet: the schedule is as it was
      error(("replace_all: make_fn failed for '%s': %s"):format(sub.path, tostring(new)), 2)
    end
    if getmetatable(new) ~= debug.getregistry()["slapo.Module"] then
      error(("replace_all: make_fn returned %s for '%s', not a module"):format(type(new), sub.path), 2)
    end
    replacements[i] = new
  end
  for i, sub in ipairs(targets) do
    sub:replace(replacements[i])
  end
  return #targets
end

-- A name slapo does not have is an error that says so where it is written, not a nil that fails a
-- line later as "attempt to index field 'bpe' (a nil value)". Only misses come here.
local module_hints = {
  bpe = "it is a module of its own: require('slapo.bpe')",
  parallel = "it is a module of its own: require('slapo.parallel')",
  subgraph = "it is a module of its own: require('slapo.subgraph')",
  knobs = "it is a module of its own: require('slapo.knobs')",
}
setmetatable(slapo, {
  __index = function(_, name)
    local hint = module_hints[name]
    if not hint and type(name) == "string" then  -- one level down: slapo.from_pretrained is slapo.models'
      local homes = {}
      for key, value in pairs(slapo) do
        if type(value) == "table" and rawget(value, name) ~= nil then table.insert(homes, "slapo." .. key .. "." .. name) end
      end
      table.sort(homes)
      hint = #homes > 0 and ("it is " .. table.concat(homes, " or ")) or nil
    end
    if not hint and type(name) == "string" then
      local names = {}
      for key in pairs(slapo) do
        if type(key) == "string" and key:sub(1, 1) ~= "_" then table.insert(names, key) end
      end
      local close = slapo._closest_names(name, names)
      hint = #close > 0 and ("did you mean slapo." .. close[1] .. "?") or nil
    end
    error(("slapo has no field '%s'%s (slapo.help() lists its functions)"):format(tostring(name),
      hint and ("; " .. hint) or ""), 2)
  end,
})

return slapo
