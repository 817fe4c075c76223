-- One row of bench/expert_parallel: a Mixtral-shaped model (8 experts, top-2) trained on one global
-- batch of 8 x 128 tokens split over the ranks, its experts spread over them (layout{ep = N}), or
-- on one rank with every expert run on every token ("dense"). Prints, from rank 0:
--   row MODE RANKS STEP_S ALL_TO_ALL_S EXPERT_PARAMS_HERE EXPERT_PARAMS_ALL ALL_TO_ALL_MIB
--   slapo-lua run --nproc N bench/expert_parallel.lua [gathered|dense]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local mode = arg[1] or "gathered"
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
local config = { hidden_size = 256, intermediate_size = 512, num_hidden_layers = 4, num_attention_heads = 8,
  num_key_value_heads = 4, num_local_experts = 8, num_experts_per_tok = 2, vocab_size = 4096,
  max_position_embeddings = 128 }
local batch, seq = 8, 128

local layout = require("slapo.parallel").layout(world > 1 and { ep = world } or { tp = 1 })
slapo.manual_seed(0)
local model = slapo.models.mixtral(config)
local function expert_params(m)
  local n = 0
  for name, p in m:named_parameters() do
    if name:find("%.experts%.") then n = n + p:numel() end
  end
  return n
end
local all_experts = expert_params(model)
local sch = slapo.create_schedule(model)
require("slapo.schedules.mixtral").schedule(sch, { ep_group = world > 1 and layout.ep_group or nil })
model = sch.mod
if mode == "dense" then
  slapo.models.expert_compute(model, "dense")
end
local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
slapo.manual_seed(1)
local ids = slapo.randint(0, config.vocab_size, { batch, seq }):narrow(0, rank * batch / world, batch / world)

local function step()
  optimizer:zero_grad()
  model(ids, { labels = ids, output_router_logits = true }):backward()
  layout:all_reduce_grads(model)
  optimizer:step()
end
for _ = 1, 2 do step() end
local seconds, exchange, bytes = {}, {}, 0
for i = 1, 5 do
  slapo.dist.barrier()
  local before, start = slapo.dist.all_to_all_totals(), slapo.clock()
  step()
  local after = slapo.dist.all_to_all_totals()
  seconds[i], exchange[i] = slapo.clock() - start, after.seconds - before.seconds
  bytes = after.bytes - before.bytes  -- the same every step: the routing of fixed rows
end
if rank == 0 then
  print(("row %s %d %.4f %.4f %d %d %.2f"):format(mode, world, timing.median(seconds), timing.median(exchange),
    expert_params(model), all_experts, bytes / 2 ^ 20))
end
