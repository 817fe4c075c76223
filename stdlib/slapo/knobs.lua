--- Tunable knobs: a script declares what may vary, the tuner (slapo-lua tune) chooses.
---   local ckpt  = slapo.knob("checkpoint", {0, 0.5, 1}, 0)
---   local batch = slapo.knob("batch", {4, 8, 16}, 8, {monotone = "memory"})
---   local tp    = slapo.knob("tp", {1, 2}, 1, {constraint = function(c) return slapo.dist.world_size() % c.tp == 0 end})
--- Without the tuner a knob is its default, or what `slapo-lua run --knob batch=16` chose
--- (SLAPO_KNOBS, a JSON object, carries the choice into every rank). slapo.report{...} hands a
--- trial's measurements to the tuner; slapo.train reports by itself.
local M = {}

local declared = {}  -- in declaration order: {name =, choices =, default =, value =, monotone =}
local by_name = {}
local chosen_cache

local function chosen()
  if chosen_cache == nil then
    local text = os.getenv("SLAPO_KNOBS")
    if text and text ~= "" then
      local ok, value = pcall(slapo.json_decode, text)
      if not ok or type(value) ~= "table" then
        error("knob: SLAPO_KNOBS must be a JSON object of knob values, got: " .. text, 0)
      end
      chosen_cache = value
    else
      chosen_cache = {}
    end
  end
  return chosen_cache
end

--- A knob value as Lua source: strings quoted, numbers and booleans as they print.
function M.literal(v)
  return type(v) == "string" and string.format("%q", v) or tostring(v)
end
local literal = M.literal

local function choices_text(choices)
  local parts = {}
  for _, c in ipairs(choices) do
    table.insert(parts, literal(c))
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

--- The configuration as Lua-ish text: {batch = 8, checkpoint = 0.5}, in declaration order.
function M.config_text(config, order)
  local parts = {}
  for _, name in ipairs(order) do
    if config[name] ~= nil then
      table.insert(parts, name .. " = " .. literal(config[name]))
    end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function report_path()
  local path = os.getenv("SLAPO_TUNE_REPORT")
  if path and path ~= "" and slapo.dist.rank() == 0 then
    return path
  end
end

local last_metrics, invalid_reason, predictions

-- The trial's report: the knobs declared so far, the values used, metrics once reported.
local function write_report()
  local path = report_path()
  if not path then
    return
  end
  local knobs = {}
  for _, k in ipairs(declared) do
    table.insert(knobs, { name = k.name, choices = k.choices, default = k.default, value = k.value,
      monotone = k.monotone or false })
  end
  slapo.write_json(path, { knobs = knobs, metrics = last_metrics or false, invalid = invalid_reason or false,
    predictions = predictions or false })
end

local same_choices = require("slapo.util").same_array

local function value_in(choices, v)
  for _, c in ipairs(choices) do
    if c == v or (type(c) == "number" and tonumber(v) == c) or tostring(c) == tostring(v) then
      return true, c
    end
  end
  return false
end

function M.knob(name, choices, default, opts)
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
    error("knob: the name must be an identifier (letters, digits, _), got " .. literal(name), 2)
  end
  if type(choices) ~= "table" or #choices == 0 then
    error(("knob '%s': choices must be a non-empty array, got %s"):format(name, type(choices)), 2)
  end
  for i, c in ipairs(choices) do
    local t = type(c)
    if t ~= "number" and t ~= "string" and t ~= "boolean" then
      error(("knob '%s': choice %d is a %s; choices are numbers, strings or booleans"):format(name, i, t), 2)
    end
  end
  opts = opts or {}
  if type(opts) ~= "table" then
    error(("knob '%s': options must be a table, got %s"):format(name, type(opts)), 2)
  end
  for key in pairs(opts) do
    if key ~= "monotone" and key ~= "constraint" then
      error(("knob '%s': unknown option '%s' (valid: monotone, constraint)"):format(name, tostring(key)), 2)
    end
  end
  if opts.monotone ~= nil and opts.monotone ~= "memory" then
    error(("knob '%s': monotone must be \"memory\" (a later choice needs at least as much memory), got %s")
      :format(name, literal(opts.monotone)), 2)
  end
  if opts.constraint ~= nil and type(opts.constraint) ~= "function" then
    error(("knob '%s': constraint must be a function(config) -> boolean, got %s"):format(name, type(opts.constraint)), 2)
  end
  if default == nil then
    default = choices[1]
  end
  if not value_in(choices, default) then
    error(("knob '%s': the default %s is not one of the choices %s"):format(name, literal(default),
      choices_text(choices)), 2)
  end
  local known = by_name[name]
  if known then  -- a script run again (hot reload, REPL) declares the same knob again
    if not same_choices(known.choices, choices) then
      error(("knob '%s': declared again with other choices (%s, before %s)"):format(name, choices_text(choices),
        choices_text(known.choices)), 2)
    end
    return known.value
  end
  local value = default
  local wanted = chosen()[name]
  if wanted ~= nil then
    local ok, v = value_in(choices, wanted)
    if not ok then
      require("slapo.util").usage_error(("knob '%s': %s is not one of the choices %s (from --knob %s=%s)"):format(name,
        literal(wanted), choices_text(choices), name, literal(wanted)), 2)
    end
    value = v
  end
  local k = { name = name, choices = choices, default = default, value = value, monotone = opts.monotone }
  table.insert(declared, k)
  by_name[name] = k
  if opts.constraint then
    local config, order = {}, {}
    for _, d in ipairs(declared) do
      config[d.name] = d.value
      table.insert(order, d.name)
    end
    local ok, fits = pcall(opts.constraint, config)
    if not ok or not fits then
      invalid_reason = ("the configuration %s breaks the constraint of knob '%s'%s"):format(M.config_text(config, order),
        name, ok and "" or (": " .. tostring(fits)))
      write_report()
      -- a configuration to change, not a fault in slapo's code: no traceback through this file
      require("slapo.util").usage_error("knob: " .. invalid_reason, 2)
    end
  end
  write_report()
  return value
end

--- Warns (stderr) about chosen values (--knob, SLAPO_KNOBS) for knobs the script never declared.
function M.warn_unused()
  local unknown = {}
  for name in pairs(chosen()) do
    if not by_name[name] then
      table.insert(unknown, name)
    end
  end
  if #unknown == 0 then
    return
  end
  table.sort(unknown)
  local names = {}
  for _, k in ipairs(declared) do
    table.insert(names, k.name)
  end
  io.stderr:write(("slapo-lua: warning: --knob %s: the script declared no such knob (declared: %s)\n"):format(
    table.concat(unknown, ", "), #names > 0 and table.concat(names, ", ") or "none"))
end

--- The knobs declared so far: {{name =, choices =, default =, value =, monotone =}, ...}
function M.knobs()
  local out = {}
  for _, k in ipairs(declared) do
    table.insert(out, { name = k.name, choices = k.choices, default = k.default, value = k.value,
      monotone = k.monotone })
  end
  return out
end

--- The chosen values by name ({} when no knob is declared).
function M.values()
  local out = {}
  for _, k in ipairs(declared) do
    out[k.name] = k.value
  end
  return out
end

--- A cost model's predictions for configurations of the knobs: {{tp = 2, zero = false, step_s =
--- 0.41}, ...} (knob values, then step_s). `slapo-lua tune` runs the best predicted first
--- (search "guided") and, with --from-plan K, only the K best. A plain run ignores them.
function M.predict(list)
  if type(list) ~= "table" then
    error("predict: expected an array of {knob = value, ..., step_s = seconds}, got " .. type(list), 2)
  end
  for i, p in ipairs(list) do
    if type(p) ~= "table" or type(p.step_s) ~= "number" or not (p.step_s > 0) then
      error(("predict: entry %d needs step_s, a positive number of seconds"):format(i), 2)
    end
    for k in pairs(p) do
      if k ~= "step_s" and k ~= "peak_gib" and not by_name[k] then
        error(("predict: entry %d names '%s', which is not a declared knob (declare knobs first)"):format(i,
          tostring(k)), 2)
      end
    end
  end
  predictions = list
  write_report()
end

--- Hands a trial's measurements to the tuner: {tokens_per_s =, step_s =, peak_mib =, ...}
--- (numbers; the tuner ranks by tokens_per_s, else by -step_s). Outside a tuned run it only
--- returns its argument.
function M.report(metrics)
  if type(metrics) ~= "table" then
    error("report: expected a table of numbers {tokens_per_s =, step_s =, peak_mib =}, got " .. type(metrics), 2)
  end
  for k, v in pairs(metrics) do
    if type(k) ~= "string" or type(v) ~= "number" or v ~= v then
      error(("report: '%s' must be a number, got %s"):format(tostring(k), literal(v)), 2)
    end
  end
  if metrics.tokens_per_s == nil and metrics.step_s == nil then
    error("report: give tokens_per_s or step_s (what the tuner ranks by)", 2)
  end
  last_metrics = metrics
  write_report()
  return metrics
end

return M
