-- Step time on 2 ranks, fully sharded against plain data parallelism, on a model that fits both
-- ways: GPT-2-small width with 4 layers (bench/timing.lua's gpt2; the vocabulary padded to 50304,
-- as nanoGPT and Megatron pad it, since fully_shard splits rows evenly), batch 2 x 128 tokens a rank,
-- AdamW, the median of 5 steps after 2. Rank 0 prints one table row per mode, all from one run.
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
    for _, block in ipairs(sch["transformer.h"]:children()) do
      block:fully_shard({ reshard_after_forward = not keep })
    end
    sch:fully_shard({ reshard_after_forward = not keep })
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
  "fully sharded (reshard after forward)", "fully sharded (kept to backward)" }
local rows, base = {}, nil
for i, mode in ipairs(modes) do
  if slapo.dist.rank() == 0 then
    io.stderr:write(("[%d/%d] %s ...\n"):format(i, #modes, mode))
  end
  local step, params = setup(mode)
  local seconds = timing.time(step, 2, 5)
  base = base or seconds
  table.insert(rows, ("| %s | %.1f M | %.3f s | %.2f |"):format(mode, params / 1e6, seconds, seconds / base))
  collectgarbage()
end
if slapo.dist.rank() == 0 then
  print("| mode | parameters held a rank | median step | vs data parallel, per parameter |")
  print("|---|---|---|---|")
  print(table.concat(rows, "\n"))
end
