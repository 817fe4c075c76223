-- Step time on 2 ranks, fully sharded against plain data parallelism, on a model that fits both
-- ways: GPT-2-small width with 4 layers (bench/timing.lua's gpt2; the vocabulary padded to 50304,
-- as nanoGPT and Megatron pad it, since fully_shard splits rows evenly), batch 2 x 128 tokens a rank,
-- AdamW. Every mode's model is built first; then each round runs one step of each (the order turning
-- round by round, so none always goes first), 2 rounds to warm up and 7 timed. Rank 0 prints the
-- median step of each mode and the median over rounds of its ratio to the first mode's step in
-- the same round, and the same for prefetch on against off and for reduce-scatters overlapped with
-- backward against waited for in place: ratios in one run, as this machine is noisy.
--   slapo-lua run --nproc 2 bench/fully_sharded_step.lua
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local layout = require("slapo.parallel").layout({ tp = 1 })
local ids = slapo.randint(0, 1000, { 2, 128 })

-- A fresh model (the same weights each time) in `mode`, and its step.
local function setup(mode)
  slapo.manual_seed(0)
  local config = {}
  for k, v in pairs(timing.configs.gpt2) do config[k] = v end
  config.vocab_size = 50304
  local model = slapo.models.gpt2(config)
  if mode:match("^fully sharded") then
    local sch = slapo.create_schedule(model)
    local keep = mode:match("kept") ~= nil
    local options = { reshard_after_forward = not keep, prefetch = mode:match("no prefetch") == nil,
      overlap_reduce = mode:match("reduce in place") == nil }
    for _, block in ipairs(sch["transformer.h"]:children()) do
      block:fully_shard(options)
    end
    sch:fully_shard(options)
  end
  local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
  local dp = mode == "data parallel, 25 MiB buckets" and layout:data_parallel(model, { bucket_mb = 25 })
  return function()
    optimizer:zero_grad()
    model(ids, { labels = ids }):backward()
    if dp then
      dp:finish()
    elseif mode == "data parallel, per parameter" then
      layout:all_reduce_grads(model)
    end  -- fully sharded: backward reduce-scattered each gradient onto its slice
    optimizer:step()
  end, model:num_params()
end

local modes = { "data parallel, per parameter", "data parallel, 25 MiB buckets",
  "fully sharded (reshard after forward)", "fully sharded (reshard, no prefetch)", "fully sharded (kept to backward)",
  "fully sharded (reshard, reduce in place)" }
local steps, params, times = {}, {}, {}
for i, mode in ipairs(modes) do
  steps[i], params[i] = setup(mode)
  times[i] = {}
end
local function median(xs)
  local sorted = { unpack(xs) }
  table.sort(sorted)
  return sorted[math.floor((#sorted + 1) / 2)]
end
local warmup, rounds = 2, 7
for round = 1, warmup + rounds do
  if slapo.dist.rank() == 0 then
    io.stderr:write(("round %d/%d%s\n"):format(round, warmup + rounds, round <= warmup and " (warm-up)" or ""))
  end
  for k = 0, #modes - 1 do
    local i = (round + k) % #modes + 1
    local started = slapo.clock()
    steps[i]()
    if round > warmup then times[i][round - warmup] = slapo.clock() - started end
  end
end
local function ratio(i, j)  -- the median over rounds of mode i's step / mode j's
  local r = {}
  for round = 1, rounds do r[round] = times[i][round] / times[j][round] end
  return median(r)
end
if slapo.dist.rank() == 0 then
  print("| mode | parameters held a rank | median step | vs data parallel, per parameter (median of rounds) |")
  print("|---|---|---|---|")
  for i, mode in ipairs(modes) do
    print(("| %s | %.1f M | %.3f s | %.2f |"):format(mode, params[i] / 1e6, median(times[i]), ratio(i, 1)))
  end
  print(("prefetch on / off, median of rounds: %.2f"):format(ratio(3, 4)))
  print(("reduce-scatter overlapped / in place, median of rounds: %.2f"):format(ratio(3, 6)))
end
