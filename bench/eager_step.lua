-- One training step (forward, backward, AdamW) of a BERT-base-like or GPT-2-small-like model,
-- timed; prints "MODEL SECONDS PEAK_RSS_MIB" for bench/run and bench/cpu-vs-pytorch.
--   slapo-lua run bench/eager_step.lua gpt2|bert [batch] [seq] [repeats] [width] [layers]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local kind, batch, seq, repeats = arg[1] or "gpt2", tonumber(arg[2] or 2), tonumber(arg[3] or 128), tonumber(arg[4] or 5)
local width, layers = tonumber(arg[5] or 768), tonumber(arg[6] or 4)

local config = {}
for k, v in pairs(timing.configs[kind]) do config[k] = v end
if kind == "gpt2" then
  config.n_embd, config.n_layer, config.n_head = width, layers, math.floor(width / 64)
else
  config.hidden_size, config.num_hidden_layers, config.num_attention_heads = width, layers, math.floor(width / 64)
  config.intermediate_size = 4 * width
end
slapo.manual_seed(0)
local model = slapo.models[kind](config)
local optimizer = slapo.optim.adamw(model, { lr = 1e-4, weight_decay = 0.0 })
local ids = slapo.randint(0, 1000, { batch, seq })
local seconds = timing.time(function()
  optimizer:zero_grad()
  model(ids, { labels = ids }):backward()
  optimizer:step()
end, 2, repeats)
print(kind, seconds, timing.peak_memory_mib())
