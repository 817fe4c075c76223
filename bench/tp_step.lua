-- Tensor parallelism on Gloo: the median step time of a GPT-2-small-width model with the
-- reference schedule over all ranks (TP = world size). Rank 0 prints "tp=N SECONDS".
--   slapo-lua run bench/tp_step.lua            (TP = 1)
--   slapo-lua run --nproc 2 bench/tp_step.lua  (TP = 2)
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
slapo.manual_seed(0)
local cfg = {}
for k, v in pairs(timing.configs.gpt2) do
  cfg[k] = v
end
cfg.vocab_size = 50304  -- Megatron pads the vocabulary so it divides by the TP size
local model = slapo.models.gpt2(cfg)
local sch = slapo.create_schedule(model)
require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
model = slapo.build(sch)
local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
local ids = slapo.randint(0, 1000, { 2, 128 })
local seconds = timing.time(function()
  optimizer:zero_grad()
  model(ids, { labels = ids }):backward()
  optimizer:step()
end, 2, 5)
if slapo.dist.rank() == 0 then
  print("tp=" .. slapo.dist.world_size(), seconds)
end
