--- slapo-lua tune: runs a script once per configuration of its knobs, each trial in its own
--- process with a time limit, and keeps every result in a JSON-lines database that a later run
--- resumes from. `slapo-lua tune --show DB` prints the leaderboard.
---
--- A trial's outcome: ok (with its metrics), oom (an allocation failed), timeout, invalid (a
--- knob's constraint refused the configuration), pruned (a smaller configuration along a
--- monotone knob ran out of memory: never run), or failed (any other exit, with its last error).
local knobs = require("slapo.knobs")
local util = require("slapo.util")

local M = {}

local literal = knobs.literal

local with_commas = util.with_commas

local function clock_text(seconds)
  seconds = math.max(0, math.floor(seconds + 0.5))
  return ("%d:%02d"):format(math.floor(seconds / 60), seconds % 60)
end

local read_file = util.read_file

-- One key per configuration, independent of table order.
local function config_key(config, order)
  local parts = {}
  for _, name in ipairs(order) do
    table.insert(parts, name .. "=" .. literal(config[name]))
  end
  return table.concat(parts, ",")
end

-- Higher is better: tokens per second, or the inverse of the step time.
local function score(metrics)
  if type(metrics) ~= "table" then
    return nil
  end
  if metrics.tokens_per_s then
    return metrics.tokens_per_s
  end
  if metrics.step_s and metrics.step_s > 0 then
    return 1 / metrics.step_s
  end
end

local function score_text(metrics)
  if metrics.tokens_per_s then
    return with_commas(metrics.tokens_per_s) .. " tok/s"
  end
  return ("%.4f s/step"):format(metrics.step_s)
end

-- A row written onto the end of a torn line (by a tuner from before appends began on a new
-- line): the longest tail of the line that parses as a row.
local function row_after_torn_text(line)
  local start = line:find('{"', 2, true)
  while start do
    local ok, row = pcall(slapo.json_decode, line:sub(start))
    if ok and type(row) == "table" and row.config then
      return row
    end
    start = line:find('{"', start + 1, true)
  end
end

local function warn_on_stderr(message)
  io.stderr:write("slapo-lua: warning: ", message, "\n")
end

--- The database: one JSON object per line. A line that does not parse (a tuner killed mid-write)
--- is skipped with a warning through `warn` (default: stderr); a whole row written after its torn
--- text on the same line is still read.
function M.read_db(path, warn)
  warn = warn or warn_on_stderr
  local rows = {}
  local f = io.open(path, "r")
  if not f then
    return rows
  end
  local number = 0
  for line in f:lines() do
    number = number + 1
    local ok, row = pcall(slapo.json_decode, line)
    if not (ok and type(row) == "table" and row.config) and line:match("%S") then
      row = row_after_torn_text(line)
      warn(("tune: line %d of '%s' is not a whole trial (a tuner killed while writing it?): %s"):format(number,
        path, row and "kept the trial written after it" or "skipped"))
    end
    if type(row) == "table" and row.config then
      table.insert(rows, row)
    end
  end
  f:close()
  return rows
end

-- True when the file's last byte is not a newline: a tuner killed mid-write left a torn line.
local function ends_mid_line(path)
  local f = io.open(path, "rb")
  if not f then
    return false
  end
  local last = "\n"  -- an empty file is not torn
  if f:seek("end") > 0 then
    f:seek("end", -1)
    last = f:read(1)
  end
  f:close()
  return last ~= "\n"
end

-- Every row starts on a line of its own: one appended onto a torn line would be lost with it.
local function append_db(path, row)
  local text = slapo.json_encode(row) .. "\n"
  if ends_mid_line(path) then
    text = "\n" .. text
  end
  local f, err = io.open(path, "a")
  if not f then
    error(("tune: cannot write the database: %s"):format(err), 0)
  end
  f:write(text)  -- one write, so a kill tears at most this row
  f:close()
end

-- The database must be a file: refused before anything (the logs directory beside it) is made.
local function check_db_path(path, command)
  if util.is_directory(path) then
    error(("%s: the database '%s' is a directory; give a file in it, such as '%s/tune.jsonl'"):format(command,
      path, (path:gsub("/+$", ""))), 0)
  end
end

-- The error a trial died of: slapo-lua reports it as the last "slapo-lua: " line of the log (on
-- several ranks, the launcher's summary naming the rank), after whatever the script printed,
-- "validation error 0.25" included. Warnings are not the cause.
local function death_error(log_text)
  local last
  for line in log_text:gmatch("[^\n]+") do
    if line:match("^slapo%-lua: ") and not line:match("^slapo%-lua: warning: ") then
      last = line
    end
  end
  return last and last:gsub("^slapo%-lua: ", "")
end

-- Why a trial failed, from its exit and the end of its log.
local function classify(result, log_text, report)
  if report and report.invalid then
    return "invalid", report.invalid
  end
  local text = log_text or ""
  local oom = text:match("[^\n]*can't allocate memory[^\n]*") or text:match("[^\n]*[Oo]ut of memory[^\n]*")
    or text:match("[^\n]*bad_alloc[^\n]*")
  if result.status == "timeout" then
    return "timeout", ("ran past the %g s limit"):format(result.limit)
  end
  if oom then
    local bytes = oom:match("tried to allocate (%d+) bytes")
    if bytes then
      return "oom", ("an allocation of %.3g GiB failed"):format(tonumber(bytes) / 2 ^ 30)
    end
    return "oom", (oom:match("[Oo]ut of memory.*") or oom):sub(1, 200)
  end
  if result.status == "signaled" then
    return "failed", ("died from signal %d"):format(result.signal)
  end
  if result.code ~= 0 then
    return "failed", (death_error(text) or ("exited with code " .. result.code)):sub(1, 300)
  end
  if not report or type(report.metrics) ~= "table" then
    return "failed", "the trial reported no metrics: call slapo.train or slapo.report{tokens_per_s = ...}"
  end
  return "ok", nil
end

-- The first trial log path not taken yet: scripts and setups that share a database keep their logs.
local function next_log(db)
  for k = 1, math.huge do
    local path = ("%s.logs/trial-%03d.log"):format(db, k)
    local taken = io.open(path, "r")
    if not taken then return path end
    taken:close()
  end
end

-- Runs the script once with `config`, its output to `log`; returns the database row and the knobs
-- it declared.
local function run_trial(opts, config, log)
  local report_path = ("%s.trial-report.json"):format(opts.db)
  os.remove(report_path)
  local argv = { slapo._executable(), "run" }
  if opts.nproc > 1 then
    table.insert(argv, "--nproc")
    table.insert(argv, tostring(opts.nproc))
  end
  table.insert(argv, opts.script)
  for _, a in ipairs(opts.args) do
    table.insert(argv, a)
  end
  local env = { SLAPO_KNOBS = slapo.json_encode(config), SLAPO_TUNE_REPORT = report_path }
  local result = slapo.run_process(argv, { env = env, timeout = opts.timeout, log = log,
    memory_mib = opts.memory_mib })
  result.limit = opts.timeout
  local report
  if read_file(report_path) then
    local ok, value = pcall(slapo.read_json, report_path)
    report = ok and value or nil
  end
  os.remove(report_path)
  local status, reason = classify(result, read_file(log), report)
  local row = { script = opts.script, hash = opts.hash, args = opts.args, nproc = opts.nproc, machine = opts.machine,
    config = config, status = status, reason = reason, seconds = result.seconds, log = log,
    time = os.date("!%Y-%m-%dT%H:%M:%SZ") }
  if status == "ok" then
    row.metrics = report.metrics
  end
  return row, report and report.knobs or nil, report and report.predictions or nil
end

-- Every configuration of the space, the defaults first, then in declaration order with the last
-- knob varying fastest (so each monotone knob ascends within its neighbours).
local function enumerate(space)
  local out = { {} }
  for _, k in ipairs(space) do
    local next_out = {}
    for _, partial in ipairs(out) do
      for _, c in ipairs(k.choices) do
        local config = {}
        for name, v in pairs(partial) do
          config[name] = v
        end
        config[k.name] = c
        table.insert(next_out, config)
      end
    end
    out = next_out
  end
  return out
end

local function index_of(choices, v)
  for i, c in ipairs(choices) do
    if c == v then
      return i
    end
  end
end

-- Slapo's rule, as a dominance test: a configuration is pruned when one that ran out of memory
-- agrees with it on every other knob and is no larger on every monotone one.
local function dominated_by_oom(config, space, oom_configs)
  for _, bad in ipairs(oom_configs) do
    local covers = true
    for _, k in ipairs(space) do
      if k.monotone then
        covers = covers and index_of(k.choices, bad[k.name]) <= index_of(k.choices, config[k.name])
      else
        covers = covers and bad[k.name] == config[k.name]
      end
    end
    if covers then
      return bad
    end
  end
end

-- The rows of the database that belong to this script, version, arguments and machine.
local function same_setup(row, opts)
  return row.hash == opts.hash and row.machine == opts.machine and row.nproc == opts.nproc
    and slapo.json_encode(row.args or {}) == slapo.json_encode(opts.args)
end

local function space_from_report(declared)
  local space = {}
  for _, k in ipairs(declared or {}) do
    table.insert(space, { name = k.name, choices = k.choices, default = k.default,
      monotone = k.monotone and k.monotone ~= false and k.monotone or nil })
  end
  return space
end

--- The command line that runs `config` again.
function M.command_line(row, order)
  local parts = { (slapo._program_name and slapo._program_name() or "slapo-lua") .. " run" }
  if (row.nproc or 1) > 1 then
    table.insert(parts, "--nproc " .. row.nproc)
  end
  for _, name in ipairs(order) do
    if row.config[name] ~= nil then
      table.insert(parts, "--knob " .. name .. "=" .. tostring(row.config[name]))
    end
  end
  table.insert(parts, row.script)
  for _, a in ipairs(row.args or {}) do
    table.insert(parts, a)
  end
  return table.concat(parts, " ")
end

local function names_of(space)
  local order = {}
  for _, k in ipairs(space) do
    table.insert(order, k.name)
  end
  return order
end

--- opts: {script =, args = {}, nproc = 1, db =, budget = 0 (no limit), search = "auto" |
--- "exhaustive" | "heuristic" | "guided", from_plan = 0 (K: only the K best predicted), timeout =
--- seconds per trial, memory_mib = 0, quiet = false, warn = fn(message) (default: stderr)}.
--- Returns {best = row or nil, rows = this run's and earlier rows, ran =, pruned =, reused =}.
function M.run(opts)
  opts.args = opts.args or {}
  opts.nproc = opts.nproc or 1
  opts.budget = opts.budget or 0
  opts.timeout = opts.timeout or 600
  opts.memory_mib = opts.memory_mib or 0
  opts.db = opts.db or "tune.jsonl"
  opts.search = opts.search or "auto"
  opts.from_plan = opts.from_plan or 0
  local searches = { auto = true, exhaustive = true, heuristic = true, guided = true }
  if not searches[opts.search] then
    error(("tune: unknown search '%s' (choices: auto, exhaustive, heuristic, guided)"):format(tostring(opts.search)),
      0)
  end
  if not read_file(opts.script) then
    error(("tune: cannot read the script '%s'"):format(opts.script), 0)
  end
  check_db_path(opts.db, "tune")
  os.execute(("mkdir -p %q"):format(opts.db .. ".logs"))  -- each trial's output goes there
  opts.hash = slapo._file_hash(opts.script)
  opts.machine = slapo._machine()
  local say = opts.quiet and function() end or function(...) print(string.format(...)) io.stdout:flush() end

  local measured, rows = {}, {}
  local declared, predictions
  for _, row in ipairs(M.read_db(opts.db, opts.warn)) do
    if same_setup(row, opts) then
      table.insert(rows, row)
      declared = declared or row.knobs
      predictions = predictions or (type(row.predictions) == "table" and row.predictions or nil)
    end
  end
  local stats = { ran = 0, pruned = 0, reused = 0 }
  local earlier = #rows
  local started = slapo.clock()

  -- The defaults run first: they tell the space (the knobs the script declares).
  if not declared then
    local log = next_log(opts.db)
    say("tune: %s: trial 1 with the defaults (finds the knobs; its output goes to %s)", opts.script, log)
    local row, found, predicted = run_trial(opts, {}, log)
    stats.ran = stats.ran + 1
    if not found or #found == 0 then
      error(("tune: %s declared no knobs (slapo.knob); the default run %s%s"):format(opts.script, row.status,
        row.reason and (": " .. row.reason) or ""), 0)
    end
    declared = found
    local config, names = {}, {}
    for _, k in ipairs(found) do
      config[k.name] = k.value
      names[#names + 1] = k.name
    end
    row.config, row.knobs = config, found
    if type(predicted) == "table" and #predicted > 0 then
      row.predictions, predictions = predicted, predicted  -- the cost model's ranking, kept for a resumed run
      for _, p in ipairs(predicted) do
        local same = true
        for _, k in ipairs(found) do
          same = same and tostring(p[k.name]) == tostring(config[k.name])
        end
        row.predicted_step_s = same and p.step_s or row.predicted_step_s
      end
    end
    say("tune: [defaults] %s %s in %s%s", knobs.config_text(config, names),
      row.status == "ok" and score_text(row.metrics) or (row.status .. ": " .. (row.reason or "")),
      clock_text(row.seconds or 0),
      row.predicted_step_s and (" (predicted %.4f s/step)"):format(row.predicted_step_s) or "")
    append_db(opts.db, row)
    table.insert(rows, row)
  end
  local space = space_from_report(declared)
  local order = names_of(space)
  local from_db = {}
  for i, row in ipairs(rows) do
    measured[config_key(row.config, order)] = row
    from_db[config_key(row.config, order)] = i <= earlier
  end

  -- Guided (the default when the script hands predictions to slapo.predict, as `slapo-lua plan`'s
  -- scripts do): the best predicted first; with --from-plan K only the K best predicted.
  local predicted = {}
  for _, p in ipairs(predictions or {}) do
    local config = {}
    for _, k in ipairs(space) do
      config[k.name] = p[k.name]
    end
    predicted[config_key(config, order)] = p.step_s
  end
  local guided = opts.search == "guided" or (opts.search == "auto" and next(predicted) ~= nil) or opts.from_plan > 0
  if guided and next(predicted) == nil then
    error(("tune: %s gives no predictions (slapo.predict), so there is nothing to guide the search or seed it "
      .. "from a plan; `slapo-lua plan ... --out plan.lua` writes a script that does"):format(opts.script), 0)
  end
  local heuristic = opts.search == "heuristic"
  if opts.search == "auto" or guided then
    for _, k in ipairs(space) do
      heuristic = heuristic or k.monotone ~= nil
    end
  end
  local all = enumerate(space)
  if guided then
    local rank = {}
    for i, config in ipairs(all) do
      rank[config] = i
    end
    table.sort(all, function(a, b)
      local pa, pb = predicted[config_key(a, order)] or math.huge, predicted[config_key(b, order)] or math.huge
      if pa ~= pb then
        return pa < pb
      end
      return rank[a] < rank[b]
    end)
    if opts.from_plan > 0 then
      local top = {}
      for _, config in ipairs(all) do
        if #top < opts.from_plan and predicted[config_key(config, order)] then
          table.insert(top, config)
        end
      end
      all = top
    end
  end
  local oom_configs, best = {}, nil
  local function consider(row)
    if row.status == "oom" then
      table.insert(oom_configs, row.config)
    end
    if row.status == "ok" and (not best or score(row.metrics) > score(best.metrics)) then
      best = row
    end
  end
  for _, row in ipairs(rows) do
    consider(row)
  end
  local trial_seconds, trials_timed = 0, 0
  for i, config in ipairs(all) do
    local key = config_key(config, order)
    local label = knobs.config_text(config, order)
    if measured[key] then
      stats.reused = stats.reused + (from_db[key] and 1 or 0)
    else
      local bad = heuristic and dominated_by_oom(config, space, oom_configs)
      if bad then
        stats.pruned = stats.pruned + 1
        say("tune: [%d/%d] %s pruned (%s ran out of memory)", i, #all, label, knobs.config_text(bad, order))
      elseif opts.budget > 0 and stats.ran >= opts.budget then
        local left = 0
        for _, c in ipairs(all) do
          left = left + (measured[config_key(c, order)] and 0 or 1)
        end
        say("tune: budget of %d trials spent; %d configurations not measured yet (run again to go on)", opts.budget,
          left)
        break
      else
        local row = run_trial(opts, config, next_log(opts.db))
        row.knobs = declared
        row.predicted_step_s = predicted[key]
        stats.ran = stats.ran + 1
        append_db(opts.db, row)
        table.insert(rows, row)
        measured[key] = row
        consider(row)
        trial_seconds, trials_timed = trial_seconds + row.seconds, trials_timed + 1
        local left = #all - i
        local outcome = row.status == "ok" and score_text(row.metrics) or (row.status .. ": " .. (row.reason or ""))
        if row.predicted_step_s then
          outcome = outcome .. (" (predicted %.4f s/step)"):format(row.predicted_step_s)
        end
        say("tune: [%d/%d] %s %s | best %s | ETA %s", i, #all, label, outcome,
          best and (score_text(best.metrics) .. " " .. knobs.config_text(best.config, order)) or "none yet",
          clock_text(left * trial_seconds / trials_timed))
      end
    end
  end
  say("tune: %d trials run, %d pruned, %d from %s, %s", stats.ran, stats.pruned, stats.reused, opts.db,
    clock_text(slapo.clock() - started))
  if best then
    say("tune: best %s %s\n  %s", score_text(best.metrics), knobs.config_text(best.config, order),
      M.command_line(best, order))
  end
  stats.best, stats.rows, stats.space = best, rows, space
  return stats
end

--- The leaderboard of a database, every setup (script version, arguments, machine) in turn.
function M.show(path, out)
  out = out or io.stdout
  check_db_path(path, "tune --show")
  local f = io.open(path, "r")
  if not f then
    error(("tune --show: no database '%s' (tune --db writes one)"):format(path), 0)
  end
  f:close()
  local rows = M.read_db(path)
  if #rows == 0 then
    error(("tune --show: no trials in '%s'"):format(path), 0)
  end
  local setups, keys, charts = {}, {}, {}
  for _, row in ipairs(rows) do
    local key = table.concat({ row.script, row.hash, row.machine, tostring(row.nproc),
      slapo.json_encode(row.args or {}) }, "|")
    if not setups[key] then
      setups[key] = {}
      table.insert(keys, key)
    end
    table.insert(setups[key], row)
  end
  for _, key in ipairs(keys) do
    local group = setups[key]
    local order = names_of(space_from_report(group[1].knobs))
    out:write(("%s (version %s, %d rank%s) on %s\n"):format(group[1].script, group[1].hash, group[1].nproc,
      group[1].nproc == 1 and "" or "s", group[1].machine))
    local ok, other = {}, {}
    for _, row in ipairs(group) do
      table.insert(row.status == "ok" and ok or other, row)
    end
    table.sort(ok, function(a, b) return score(a.metrics) > score(b.metrics) end)
    local with_predictions = false
    for _, row in ipairs(group) do
      with_predictions = with_predictions or row.predicted_step_s ~= nil
    end
    out:write("| rank | configuration | tokens/s | step s | peak MiB |" .. (with_predictions and " predicted step s |" or "")
      .. "\n|---|---|---|---|---|" .. (with_predictions and "---|" or "") .. "\n")
    for i, row in ipairs(ok) do
      local m = row.metrics
      out:write(("| %d | %s | %s | %s | %s |"):format(i, knobs.config_text(row.config, order),
        m.tokens_per_s and with_commas(m.tokens_per_s) or "-", m.step_s and ("%.4f"):format(m.step_s) or "-",
        m.peak_mib and ("%d"):format(m.peak_mib) or "-"))
      if with_predictions then
        out:write(row.predicted_step_s and (" %.4f |"):format(row.predicted_step_s) or " - |")
      end
      out:write("\n")
    end
    for _, row in ipairs(other) do
      out:write(("| - | %s | %s: %s | | |%s\n"):format(knobs.config_text(row.config, order), row.status,
        (row.reason or ""):gsub("|", "/"), with_predictions and " |" or ""))
    end
    if ok[1] then
      out:write("best: ", M.command_line(ok[1], order), "\n")
    end
    charts[#charts + 1] = { rows = group, knobs = space_from_report(group[1].knobs), order = order,
      title = ("%s on %s"):format(group[1].script, group[1].machine) }
    out:write("\n")
  end
  -- The newest setup's chart beside the database: throughput against each knob.
  local chart = charts[#charts]
  for _, row in ipairs(chart.rows) do
    row.label = knobs.config_text(row.config, chart.order)
  end
  local svg = (path:gsub("%.jsonl$", "")) .. ".svg"
  local f = io.open(svg, "w")
  if f then
    f:write(require("slapo.tune_plot").svg(chart.rows, chart.knobs, chart.title))
    f:close()
    out:write(("chart: %s\n"):format(svg))
  end
  return svg
end

return M
