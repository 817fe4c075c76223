-- Activation checkpointing: peak memory and step time of a 12-layer GPT-2 with none, half or all
-- layers checkpointed. Run each mode in its own process (peak memory is per process).
--   slapo-lua run bench/checkpoint_step.lua none|half|all
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local mode = arg[1] or "none"
local fraction = ({ none = 0, half = 0.5, all = 1 })[mode]
if not fraction then
  error("checkpoint_step: mode must be none, half or all, got " .. mode)
end
slapo.manual_seed(0)
local model = slapo.models.gpt2({ n_embd = 512, n_layer = 12, n_head = 8, vocab_size = 8192, n_positions = 512,
  resid_pdrop = 0.0, embd_pdrop = 0.0, attn_pdrop = 0.0 })
local sch = slapo.create_schedule(model)
require("slapo.schedules.gpt2").schedule(sch, { checkpoint = fraction })
local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
local ids = slapo.randint(0, 8192, { 4, 256 })
local base = timing.peak_memory_mib()
local seconds = timing.time(function()
  optimizer:zero_grad()
  model(ids, { labels = ids }):backward()
  optimizer:step()
end, 1, 3)
print(mode, seconds, timing.peak_memory_mib(), base)
