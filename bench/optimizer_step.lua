-- AdamW's step alone over a GPT-2's parameters: torch::optim::AdamW's per-parameter loop against
-- the multi-tensor paths (ATen's _foreach_ ops, and the one-pass fused kernel), ratios in one run.
--   slapo-lua run bench/optimizer_step.lua [n_layer] [device]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")

local layers, device = tonumber(arg[1] or 4), arg[2] or "cpu"
slapo.manual_seed(0)
local model = slapo.models.gpt2({ n_embd = 768, n_layer = layers, n_head = 12 }):to(device)
local ids = slapo.randint(0, 50257, { 1, 8 }):to(device)
model(ids, { labels = ids }):backward()  -- a gradient for every parameter, as after backward

local function sync() if device ~= "cpu" then slapo.cuda.synchronize() end end
print(("AdamW step over %.1fM parameters (GPT-2, %d layers) on %s"):format(model:num_params() / 1e6, layers, device))
print("| impl | median step | vs torch's loop |")
print("|---|---|---|")
local base
for _, impl in ipairs({ "loop", "foreach", "fused" }) do
  local opt = slapo.optim.adamw(model, { lr = 1e-6, weight_decay = 0.01, impl = impl })
  local t = timing.time(function() opt:step(); sync() end, 2, 7)
  base = base or t
  print(("| %s | %.1f ms | %.2f |"):format(impl, t * 1000, t / base))
end
