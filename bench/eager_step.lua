-- One training step (forward, backward, AdamW) of a BERT-base-like or GPT-2-small-like model,
-- timed; prints "MODEL SECONDS" for bench/run.
--   slapo-lua run bench/eager_step.lua gpt2|bert [batch] [seq] [repeats]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local kind, batch, seq, repeats = arg[1] or "gpt2", tonumber(arg[2] or 2), tonumber(arg[3] or 128), tonumber(arg[4] or 5)

slapo.manual_seed(0)
local model = slapo.models[kind](timing.configs[kind])
local optimizer = slapo.optim.adamw(model, { lr = 1e-4, weight_decay = 0.0 })
local ids = slapo.randint(0, 1000, { batch, seq })
local seconds = timing.time(function()
  optimizer:zero_grad()
  model(ids, { labels = ids }):backward()
  optimizer:step()
end, 2, repeats)
print(kind, seconds)
