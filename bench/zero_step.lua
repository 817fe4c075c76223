-- ZeRO-1 and ZeRO-2 against plain data parallelism on N ranks of one machine: each rank's peak
-- tensor memory over a step, what that saves against data parallelism as a share of the state the
-- mode shards, and the step time as a ratio (issue 58, item 3). GPT-2-shaped, width 512, 4 layers,
-- the vocabulary padded to 50304; batch 2 x 128 tokens a rank; AdamW.
--   dp:     25 MiB buckets reduced during backward, the gradients views into them (DDP's way)
--   zero-1: slapo.optim.zero_adamw over the ranks (AdamW's moments 1/N), in 64 MiB chunks
--   zero-1, one chunk: the same with the whole model's gradients in one chunk (chunk_mib = 2^20),
--           as its step was before it went in chunks
--   zero-2: fully_shard{reshard_after_forward = false} on each block and the root (moments and
--           gradients 1/N, the weights whole from forward to backward: FSDP's SHARD_GRAD_OP)
-- Peak = the tensors a mode holds after 2 warm-up steps (weights, gradients, state; held_tensor_mib)
-- + the most any timed step allocates above that (peak_tensor_mib), the fullest rank's. Every mode's
-- model is built first; each round runs one step of each, the order turning; ratios are medians
-- over rounds of the two steps' ratio within a round.
--   slapo-lua run --nproc N bench/zero_step.lua [rounds, default 7]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
local layout = require("slapo.parallel").layout({ tp = 1 })
local rounds, warmup = tonumber(arg[1] or 7), 2
slapo.manual_seed(1 + rank)
local ids = slapo.randint(0, 50304, { 2, 128 })

local function model_of()
  slapo.manual_seed(0)
  local config = {}
  for k, v in pairs(timing.configs.gpt2) do config[k] = v end
  config.vocab_size, config.n_embd, config.n_head, config.n_layer = 50304, 512, 8, 4
  return slapo.models.gpt2(config)
end

-- The mode's step; built under the meter by the caller.
local function setup(mode)
  local model = model_of()
  if mode == "zero-2" then
    local sch = slapo.create_schedule(model)
    for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ reshard_after_forward = false }) end
    sch:fully_shard({ reshard_after_forward = false })
  end
  local optimizer = mode:match("^zero%-1")
    and slapo.optim.zero_adamw(model, { lr = 1e-4, chunk_mib = mode:match("one chunk") and 2 ^ 20 or nil })
    or slapo.optim.adamw(model, { lr = 1e-4 })
  local dp = mode == "dp" and layout:data_parallel(model, { bucket_mb = 25 })
  local step = function()
    optimizer:zero_grad()
    model(ids, { labels = ids }):backward()
    if dp then dp:finish() end  -- zero-1 reduces in step(), zero-2 in backward
    optimizer:step()
  end
  for _ = 1, warmup do step() end
  return step, model:num_params({ gathered = true })
end

local modes = { "dp", "zero-1", "zero-1, one chunk", "zero-2" }
local steps, held, peaks, times, params = {}, {}, {}, {}, nil
for i, mode in ipairs(modes) do
  collectgarbage()
  held[i], steps[i], params = slapo.held_tensor_mib(setup, mode)
  peaks[i], times[i] = 0, {}
end
local median = timing.median
for round = 1, rounds do
  if rank == 0 then io.stderr:write(("round %d/%d\n"):format(round, rounds)) end
  for k = 0, #modes - 1 do
    local i = (round + k) % #modes + 1
    collectgarbage()
    local started = slapo.clock()
    local above = slapo.peak_tensor_mib(steps[i])
    times[i][round] = slapo.clock() - started
    peaks[i] = math.max(peaks[i], above)
  end
end
-- the fullest rank's peak of each mode
local mine = {}
for i = 1, #modes do mine[i] = held[i] + peaks[i] end
local all = slapo.dist.all_gather(slapo.tensor(mine, { dtype = "float64" }), 0):tolist()  -- rank by rank
local fullest = {}
for i = 1, #modes do
  fullest[i] = 0
  for r = 1, world do fullest[i] = math.max(fullest[i], all[(r - 1) * #modes + i]) end
end
local function ratio(i, j)
  local r = {}
  for round = 1, rounds do r[round] = times[i][round] / times[j][round] end
  return median(r)
end
if rank == 0 then
  local mib = params / 2 ^ 20
  -- what each mode shards of plain data parallelism's state: AdamW's two moments (zero-1), and the gradients (zero-2)
  local sharded = { 0, 8 * mib * (1 - 1 / world), 8 * mib * (1 - 1 / world), 12 * mib * (1 - 1 / world) }
  print(("%d ranks, %.1f M parameters, %d rounds; peak = held after warm-up + the most a step allocates above it, fullest rank")
    :format(world, params / 1e6, rounds))
  print()
  print("| mode | peak MiB | saved vs dp, MiB | state sharded, MiB | saved / sharded | median step | step vs dp (median of rounds) |")
  print("|---|---|---|---|---|---|---|")
  for i, mode in ipairs(modes) do
    local saved = fullest[1] - fullest[i]
    print(("| %s | %.0f | %.0f | %.0f | %s | %.3f s | %.2f |"):format(mode, fullest[i], saved, sharded[i],
      i == 1 and "-" or ("%.2f"):format(saved / sharded[i]), median(times[i]), ratio(i, 1)))
  end
end
