-- The training step of bench/host_overhead.cpp, driven from Lua. Prints "lua SECONDS".
--   slapo-lua run bench/host_step.lua [repeats]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local repeats = tonumber(arg[1] or 200)
slapo.manual_seed(0)
local model = slapo.models.gpt2({ n_embd = 64, n_layer = 2, n_head = 4, vocab_size = 256, n_positions = 32,
  resid_pdrop = 0.0, embd_pdrop = 0.0, attn_pdrop = 0.0 })
local optimizer = slapo.optim.adamw(model, { lr = 1e-4, weight_decay = 0.0 })
local ids = slapo.randint(0, 256, { 2, 16 })
local labels = { labels = ids }
print("lua", timing.time(function()
  optimizer:zero_grad()
  model(ids, labels):backward()
  optimizer:step()
end, 10, repeats))
