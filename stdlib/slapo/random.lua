--- Named random streams, as Megatron's RNG tracker: a tensor-parallel model draws dropout masks of
--- replicated activations from the default stream (equal on every rank) and those of partitioned
--- activations from a stream seeded per rank.
---   local tp_seed = slapo.random.model_parallel_seed(1234, tp_rank)
---   local y = slapo.random.get_tracker():fork("model-parallel-rng", function() return F.dropout(x, 0.1, true) end)
--- Streams hold the CPU generator's state (slapo.rng_state); the fork_rng primitive gives one
--- module a stream of its own the same way.
local M = {}

local Tracker = {}
Tracker.__index = Tracker

local function pack(...)
  return { n = select("#", ...), ... }
end

-- The streams' states live in the host (slapo._rng_stream), under "<tracker>/<name>", so that
-- checkpoint's recomputation replays a stream drawn from inside a checkpointed module as it
-- replays the default one (Megatron's checkpoint restores its tracker's states the same way).
local trackers = 0

--- A tracker with no streams.
function M.tracker()
  trackers = trackers + 1
  return setmetatable({ prefix = ("tracker%d/"):format(trackers), seeds = {} }, Tracker)
end

function Tracker:state(name)
  return slapo._rng_stream(self.prefix .. name)
end

function Tracker:set_state(name, state)
  slapo._set_rng_stream(self.prefix .. name, state)
end

-- Drops every stream of this tracker.
local function drop_streams(self)
  for _, key in ipairs(slapo._rng_stream_keys(self.prefix)) do
    slapo._set_rng_stream(key, nil)
  end
end

function Tracker:reset()
  drop_streams(self)
  self.seeds = {}
end

--- name -> generator state (a copy)
function Tracker:get_states()
  local out = {}
  for _, key in ipairs(slapo._rng_stream_keys(self.prefix)) do
    out[key:sub(#self.prefix + 1)] = slapo._rng_stream(key)
  end
  return out
end

function Tracker:set_states(states)
  if type(states) ~= "table" then
    error("rng tracker: set_states takes a table name -> state, got " .. type(states), 2)
  end
  drop_streams(self)
  for name, state in pairs(states) do
    self:set_state(name, state)
  end
end

--- A new stream `name` seeded with `seed`; names and seeds are each used once.
function Tracker:add(name, seed)
  if type(name) ~= "string" then
    error("rng tracker: add takes a stream name, got " .. type(name), 2)
  end
  if type(seed) ~= "number" or seed ~= math.floor(seed) or seed < 0 then
    error(("rng tracker: the seed of '%s' must be an integer >= 0, got %s"):format(name, tostring(seed)), 2)
  end
  if self:state(name) ~= nil then
    error(("rng tracker: a stream named '%s' exists already"):format(name), 2)
  end
  for other, s in pairs(self.seeds) do
    if s == seed then
      error(("rng tracker: seed %d is taken by stream '%s'"):format(seed, other), 2)
    end
  end
  local saved = slapo.rng_state()
  slapo.manual_seed(seed)
  self:set_state(name, slapo.rng_state())
  self.seeds[name] = seed
  slapo.set_rng_state(saved)
end

--- Runs fn(...) drawing from stream `name` (default "model-parallel-rng"), then puts the default
--- stream back; the stream goes on where fn left it. Returns fn's results.
function Tracker:fork(name, fn, ...)
  if type(name) == "function" then
    return self:fork("model-parallel-rng", name, fn, ...)
  end
  if type(name) ~= "string" then
    error(("rng tracker: fork takes a stream name and a function, got %s"):format(type(name)), 2)
  end
  if self:state(name) == nil then
    local names = {}
    for n in pairs(self:get_states()) do
      table.insert(names, n)
    end
    table.sort(names)
    error(("rng tracker: no stream named '%s' (streams: %s)"):format(tostring(name),
      #names > 0 and table.concat(names, ", ") or "none; add one first"), 2)
  end
  local saved = slapo.rng_state()
  slapo.set_rng_state(self:state(name))
  local results = pack(pcall(fn, ...))
  self:set_state(name, slapo.rng_state())
  slapo.set_rng_state(saved)
  if not results[1] then
    error(results[2], 0)
  end
  return unpack(results, 2, results.n)
end

local default_tracker = M.tracker()

--- The process's tracker (the one model_parallel_seed sets up).
function M.get_tracker()
  return default_tracker
end

--- Seeds the default stream with `seed` (the same on every rank) and the tracker's
--- "model-parallel-rng" stream with seed + 2718 + tp_rank (Megatron's offset); returns that seed.
function M.model_parallel_seed(seed, tp_rank)
  tp_rank = tp_rank or 0
  local tp_seed = seed + 2718 + tp_rank
  slapo.manual_seed(seed)
  default_tracker:reset()
  default_tracker:add("model-parallel-rng", tp_seed)
  return tp_seed
end

return M
