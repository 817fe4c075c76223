-- Data parallelism on 2 ranks: one training step of a GPT-2-small-width model (4 layers) with
-- gradients averaged (a) by one all-reduce per parameter after backward, (b) in 25 MiB buckets
-- started during backward, (c) in 4 MiB buckets. Rank 0 prints one table row per mode.
--   slapo-lua run --nproc 2 bench/dp_step.lua
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local layout = require("slapo.parallel").layout({ tp = 1 })

slapo.manual_seed(0)
local model = slapo.models.gpt2(timing.configs.gpt2)
local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
local ids = slapo.randint(0, 1000, { 2, 128 })

local function step_time(mode)
  local dp = mode ~= "per-parameter" and layout:data_parallel(model, { bucket_mb = mode == "4 MiB buckets" and 4 or 25 })
  local seconds = timing.time(function()
    optimizer:zero_grad()
    model(ids, { labels = ids }):backward()
    if dp then
      dp:finish()
    else
      layout:all_reduce_grads(model)
    end
    optimizer:step()
  end, 2, 7)
  return seconds, dp and (#dp:buckets() .. " (" .. dp:started_early() .. " during backward)") or "-"
end

local rows, base = {}, nil
for _, mode in ipairs({ "per-parameter", "25 MiB buckets", "4 MiB buckets" }) do
  local seconds, buckets = step_time(mode)
  base = base or seconds
  table.insert(rows, ("| %s | %s | %.3f s | %.2f |"):format(mode, buckets, seconds, seconds / base))
  collectgarbage()  -- drop the last mode's hooks before the next
end
if slapo.dist.rank() == 0 then
  print("| gradient averaging | buckets | median step | vs per-parameter |")
  print("|---|---|---|---|")
  print(table.concat(rows, "\n"))
end
