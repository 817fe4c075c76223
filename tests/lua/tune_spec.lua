-- The tuner (stdlib/slapo/tune.lua) on synthetic scripts whose best configuration and failures
-- are known: every trial is a real `slapo-lua run` process.
local tune = require("slapo.tune")

local dir = os.tmpname()
os.remove(dir)
os.execute(("mkdir -p %q"):format(dir))

local function write(name, text)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- a x b: throughput 100a + 10b; a * b >= 8 allocates 4 TB (a real allocation failure); a = 3
-- with b = 1 exits 1. The best that runs is a = 3, b = 2 (320).
local space = write("space.lua", [[
local a = slapo.knob("a", {1, 2, 3}, 1)
local b = slapo.knob("b", {1, 2, 4, 8}, 1, {monotone = "memory"})
if a * b >= 8 then
  slapo.zeros({1e6, 1e6})
end
if a == 3 and b == 1 then
  os.exit(1)
end
slapo.report({tokens_per_s = 100 * a + 10 * b, step_s = 1 / (100 * a + 10 * b)})
]])

local function count(rows, status)
  local n = 0
  for _, r in ipairs(rows) do
    n = n + (r.status == status and 1 or 0)
  end
  return n
end

describe("slapo-lua tune on a space with a known optimum", function()
  it("exhaustive search measures all 12 configurations and finds a = 3, b = 2", function()
    local db = dir .. "/exhaustive.jsonl"
    local r = tune.run({ script = space, db = db, search = "exhaustive", quiet = true, timeout = 60 })
    eq(12, r.ran)
    eq(0, r.pruned)
    eq(3, r.best.config.a)
    eq(2, r.best.config.b)
    eq(320, r.best.metrics.tokens_per_s)
    eq(6, count(r.rows, "ok"))
    eq(5, count(r.rows, "oom"))
    eq(1, count(r.rows, "failed"))
    local failed
    for _, row in ipairs(r.rows) do
      failed = row.status == "failed" and row or failed
    end
    eq(3, failed.config.a)
    matches("exited with code 1", failed.reason)
  end)
end)

describe("the heuristic search (Slapo's: stop a monotone knob at its first out-of-memory)", function()
  it("prunes the 2 larger configurations and still finds the exhaustive best with 10 trials", function()
    local r = tune.run({ script = space, db = dir .. "/heuristic.jsonl", quiet = true, timeout = 60 })
    eq(10, r.ran)
    eq(2, r.pruned)
    eq(3, count(r.rows, "oom"))
    eq(320, r.best.metrics.tokens_per_s)
    matches("an allocation of 3.73e%+03 GiB failed", r.rows[4].reason)
  end)
end)

describe("the database", function()
  it("a run with a budget stops early; the next run goes on from the database without repeating", function()
    local db = dir .. "/resume.jsonl"
    local first = tune.run({ script = space, db = db, budget = 4, search = "exhaustive", quiet = true, timeout = 60 })
    eq(4, first.ran)
    eq(140, first.best.metrics.tokens_per_s)
    local second = tune.run({ script = space, db = db, search = "exhaustive", quiet = true, timeout = 60 })
    eq(8, second.ran)
    eq(4, second.reused)
    eq(320, second.best.metrics.tokens_per_s)
    eq(12, #tune.read_db(db))
    local third = tune.run({ script = space, db = db, search = "exhaustive", quiet = true, timeout = 60 })
    eq(0, third.ran)
    eq(12, third.reused)
  end)

  it("skips a torn last line with a warning and starts the next row on a line of its own", function()
    local db = dir .. "/torn.jsonl"
    tune.run({ script = space, db = db, budget = 2, search = "exhaustive", quiet = true, timeout = 60 })
    local f = assert(io.open(db, "a"))
    f:write('{"config": {"a": 1, "b": 4}, "stat')  -- a tuner killed mid-write: no newline
    f:close()
    local warnings = {}
    local function warn(message)
      table.insert(warnings, message)
    end
    eq(2, #tune.read_db(db, warn))
    matches("^tune: line 3 of '.*torn.jsonl' is not a whole trial %(a tuner killed while writing it%?%): skipped$",
      warnings[1])
    local r = tune.run({ script = space, db = db, budget = 1, search = "exhaustive", quiet = true, timeout = 60,
      warn = warn })
    eq(1, r.ran)
    eq(2, r.reused)
    local rows = tune.read_db(db, warn)
    eq(3, #rows, "the new trial's row is read back")
    eq(4, rows[3].config.b, "the configuration the torn line held ran again")
    matches('"stat\n{"', assert(io.open(db)):read("*a"))
    local again = tune.run({ script = space, db = db, budget = 1, search = "exhaustive", quiet = true, timeout = 60,
      warn = warn })
    eq(3, again.reused, "nothing measured twice")
  end)

  it("reads a row that an older tuner appended onto a torn line, with a warning", function()
    local db = dir .. "/merged.jsonl"
    tune.run({ script = space, db = db, budget = 2, search = "exhaustive", quiet = true, timeout = 60 })
    local lines = {}
    for line in io.lines(db) do
      table.insert(lines, line)
    end
    local f = assert(io.open(db, "w"))
    f:write(lines[1], "\n", '{"config": {"a": 1, "b": 4}, "stat', lines[2], "\n")
    f:close()
    local warnings = {}
    local rows = tune.read_db(db, function(message) table.insert(warnings, message) end)
    eq(2, #rows)
    eq(2, rows[2].config.b)
    matches("line 2 of '.*merged.jsonl' is not a whole trial .*: kept the trial written after it", warnings[1])
  end)

  it("refuses a database that is a directory, naming it, before making its logs directory", function()
    local db = dir .. "/a_directory"
    os.execute(("mkdir -p %q"):format(db))
    eq("tune: the database '" .. db .. "' is a directory; give a file in it, such as '" .. db .. "/tune.jsonl'",
      pcall_err(tune.run, { script = space, db = db, quiet = true, timeout = 60 }))
    eq(false, require("slapo.util").is_directory(db .. ".logs"), "no logs directory made")
    eq("tune --show: the database '" .. db .. "' is a directory; give a file in it, such as '" .. db
      .. "/tune.jsonl'", pcall_err(tune.show, db))
  end)

  it("a changed script is a new setup: nothing is reused", function()
    local db = dir .. "/changed.jsonl"
    local copy = write("changed.lua", "-- v1\n" .. assert(io.open(space)):read("*a"))
    tune.run({ script = copy, db = db, budget = 2, search = "exhaustive", quiet = true, timeout = 60 })
    write("changed.lua", "-- v2\n" .. assert(io.open(space)):read("*a"))
    local r = tune.run({ script = copy, db = db, budget = 2, search = "exhaustive", quiet = true, timeout = 60 })
    eq(0, r.reused)
    eq(2, r.ran)
    -- each setup's trials keep their own logs: four rows, four logs
    local logs = {}
    for _, row in ipairs(tune.read_db(db)) do logs[row.log] = (logs[row.log] or 0) + 1 end
    local count = 0
    for path, uses in pairs(logs) do
      eq(1, uses, path)
      count = count + 1
    end
    eq(4, count)
  end)

  it("--show prints the leaderboard, the failures and the best configuration as a command line", function()
    local db = dir .. "/exhaustive.jsonl"
    local out = dir .. "/show.txt"
    local f = assert(io.open(out, "w"))
    tune.show(db, f)
    f:close()
    local text = assert(io.open(out)):read("*a")
    matches("| 1 | {a = 3, b = 2} | 320 |", text)
    matches("| 6 | {a = 1, b = 1} | 110 |", text)
    matches("| %- | {a = 3, b = 1} | failed: exited with code 1 |", text)
    matches("best: %S*slapo%-lua run %-%-knob a=3 %-%-knob b=2 .*space.lua", text)
    matches("chart: .*exhaustive.svg", text)
    local svg = assert(io.open(dir .. "/exhaustive.svg")):read("*a")
    matches("^<svg", svg)
    local _, dots = svg:gsub("<circle[^>]*fill=\"#1f77b4\"", "")
    eq(2 * 6, dots, "one dot per measured trial in each of the 2 panels")
    local _, crosses = svg:gsub(">x<title>", "")
    eq(2 * 6, crosses, "one cross per infeasible trial in each panel")
    matches("<title>{a = 3, b = 2}</title>", svg)
  end)
end)

describe("trials that hang, fail or break a constraint", function()
  local script = write("modes.lua", [[
local mode = slapo.knob("mode", {"fast", "hang", "bad"}, "fast")
local n = slapo.knob("n", {1, 2}, 1, {constraint = function(c) return not (c.mode == "bad" and c.n == 2) end})
if mode == "hang" then
  while true do end
end
if mode == "bad" then
  error("no such mode")
end
slapo.report({step_s = 0.5 / n})
]])

  it("marks each infeasible with its reason and keeps going", function()
    -- a limit well above a trial's start-up, which a loaded machine (or AddressSanitizer) slows
    local r = tune.run({ script = script, db = dir .. "/modes.jsonl", quiet = true, timeout = 8 })
    eq(6, r.ran)
    local by = {}
    for _, row in ipairs(r.rows) do
      by[row.config.mode .. row.config.n] = row
    end
    eq("ok", by.fast1.status)
    eq("ok", by.fast2.status)
    eq("timeout", by.hang1.status)
    matches("ran past the 8 s limit", by.hang2.reason)
    assert(by.hang2.seconds < 10, "the hanging trial was stopped")
    eq("failed", by.bad1.status)
    matches("no such mode", by.bad1.reason)
    eq("invalid", by.bad2.status)
    matches("the configuration {mode = \"bad\", n = 2} breaks the constraint of knob 'n'", by.bad2.reason)
    eq(2, r.best.config.n)
    eq("fast", r.best.config.mode)
  end)

  it("gives the error a failed trial died of, not an earlier line of its output that says error", function()
    local noisy = write("noisy.lua", [[
local x = slapo.knob("x", {1, 2}, 1)
print("validation error 0.25")
io.stderr:write("Error bars are wide\n")
if x == 2 then
  error("the loss diverged at step 3")
end
slapo.report({step_s = 1})
]])
    local r = tune.run({ script = noisy, db = dir .. "/noisy.jsonl", quiet = true, timeout = 60 })
    eq(2, r.ran)
    eq("failed", r.rows[2].status)
    matches("^[^\n]*noisy.lua:5: the loss diverged at step 3$", r.rows[2].reason)
  end)
end)

describe("slapo.knob", function()
  it("is its default without a tuner, and lists itself in slapo.knobs()", function()
    eq(8, slapo.knob("spec_batch", { 4, 8, 16 }, 8, { monotone = "memory" }))
    eq(8, slapo.knob("spec_batch", { 4, 8, 16 }, 8), "declared again: the same value")
    local found
    for _, k in ipairs(slapo.knobs()) do
      found = k.name == "spec_batch" and k or found
    end
    eq("memory", found.monotone)
    eq(3, #found.choices)
  end)

  it("names the run's knob values at the top of every schedule log, which still replays", function()
    local sch = slapo.create_schedule(slapo.nn.Linear(4, 4))
    sch:annotate("weight", "k", 1)
    matches("^%-%- knobs: {spec_batch = 8}\n%-%- slapo schedule log", sch:log())
    load(sch:log())()(slapo.create_schedule(slapo.nn.Linear(4, 4)), sch:log_args())
  end)

  it("refuses bad declarations, naming the knob and what is valid", function()
    matches("knob 'k1': the default 3 is not one of the choices {1, 2}", pcall_err(slapo.knob, "k1", { 1, 2 }, 3))
    matches("knob 'k2': unknown option 'monotonic' %(valid: monotone, constraint%)",
      pcall_err(slapo.knob, "k2", { 1 }, 1, { monotonic = "memory" }))
    matches("knob 'k3': monotone must be \"memory\"", pcall_err(slapo.knob, "k3", { 1 }, 1, { monotone = true }))
    matches("knob 'k4': choices must be a non%-empty array", pcall_err(slapo.knob, "k4", {}, 1))
    matches("knob 'k5': choice 2 is a table", pcall_err(slapo.knob, "k5", { 1, {} }))
    matches("knob: the name must be an identifier", pcall_err(slapo.knob, "a b", { 1 }))
    matches("knob 'spec_batch': declared again with other choices %({4, 8}, before {4, 8, 16}%)",
      pcall_err(slapo.knob, "spec_batch", { 4, 8 }, 8))
    matches("report: give tokens_per_s or step_s", pcall_err(slapo.report, { peak_mib = 3 }))
    matches("report: 'step_s' must be a number, got \"fast\"", pcall_err(slapo.report, { step_s = "fast" }))
  end)
end)

describe("slapo.run_process", function()
  it("returns the exit code, and refuses bad arguments by name", function()
    local r = slapo.run_process({ "sh", "-c", "exit 3" })
    eq("exited", r.status)
    eq(3, r.code)
    local t = slapo.run_process({ "sleep", "30" }, { timeout = 0.3 })
    eq("timeout", t.status)
    assert(t.seconds < 5)
    matches("run_process: unknown option 'timout'", pcall_err(slapo.run_process, { "true" }, { timout = 1 }))
    matches("run_process: argv is empty", pcall_err(slapo.run_process, {}))
  end)
end)

describe("a memory limit per trial (--memory-mib)", function()
  it("turns an allocation past it into an out-of-memory trial", function()
    local script = write("alloc.lua", [[
local mib = slapo.knob("mib", {16, 2048}, 16, {monotone = "memory"})
local x = slapo.zeros({mib, 1024, 256})
slapo.report({step_s = 1, peak_mib = mib})
]])
    local opts = { script = script, db = dir .. "/alloc.jsonl", quiet = true, timeout = 60, memory_mib = 1500 }
    if slapo.sanitized then  -- AddressSanitizer's shadow memory exceeds any address-space limit
      matches("memory_mib cannot cap a process of this AddressSanitizer build", pcall_err(tune.run, opts))
      return
    end
    local r = tune.run(opts)
    eq(2, r.ran)
    eq(16, r.best.config.mib)
    eq("oom", r.rows[2].status)
    matches("an allocation of 2 GiB failed", r.rows[2].reason)
  end)
end)

describe("a search guided by predictions (slapo.predict, as slapo-lua plan's scripts)", function()
  -- the cost model ranks c = 3 fastest, then 1, then 2; c = 4 has no prediction
  local script = write("predicted.lua", [[
local c = slapo.knob("c", {1, 2, 3, 4}, 2)
slapo.predict({ {c = 3, step_s = 0.1}, {c = 1, step_s = 0.2}, {c = 2, step_s = 0.3} })
slapo.report({step_s = 1 / c})
]])

  it("runs the best predicted first and the unpredicted last", function()
    local r = tune.run({ script = script, db = dir .. "/guided.jsonl", quiet = true, timeout = 60 })
    eq(4, r.ran)
    local order = {}
    for _, row in ipairs(r.rows) do
      table.insert(order, row.config.c)
    end
    eq({ 2, 3, 1, 4 }, order, "the defaults, then by prediction")
    eq(0.3, r.rows[1].predicted_step_s)
    eq(0.1, r.rows[2].predicted_step_s)
    eq(nil, r.rows[4].predicted_step_s)
  end)

  it("--from-plan K runs only the K best predicted (the defaults among them count)", function()
    local r = tune.run({ script = script, db = dir .. "/from_plan.jsonl", quiet = true, timeout = 60, from_plan = 2 })
    eq(3, r.ran, "the defaults (c = 2) to learn the space, then c = 3 and c = 1")
    eq(3, r.best.config.c)
    matches("gives no predictions %(slapo.predict%)", pcall_err(tune.run, { script = space, db = dir .. "/np.jsonl",
      quiet = true, timeout = 60, from_plan = 2 }))
  end)

  it("refuses predictions that name no declared knob", function()
    matches("predict: entry 1 names 'nope', which is not a declared knob",
      pcall_err(slapo.predict, { { nope = 1, step_s = 1 } }))
    matches("predict: entry 1 needs step_s", pcall_err(slapo.predict, { { spec_batch = 4 } }))
  end)
end)
