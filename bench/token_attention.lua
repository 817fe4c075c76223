-- Attention on each rank's queries against Megatron's, measured on Gloo ranks: the intra-op pass's
-- plans for a BERT layer (slapo.autoshard on this machine's measured "cpu" profile), applied to
-- every layer, each trained with AdamW in the same run: the time objective on whole tokens and with
-- sequence parallelism, and Slapo's volume objective (attention on each rank's queries). Rank 0
-- prints a table: the objective, what the plan does with attention's keys, the pass's predicted
-- layer time and forward volume, the measured median step and the step relative to the
-- sequence-parallel time plan.
--   slapo-lua run --nproc 2 bench/token_attention.lua [SEQ] [WIDTH] [DEVICE]   (default 512 256 cpu)
-- DEVICE: a profile, as `slapo-lua profile-device --ranks 2 --out dev.json` writes one with measured links
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
local seq, width = tonumber(arg and arg[1]) or 512, tonumber(arg and arg[2]) or 256
local batch = 2
local config = { hidden_size = width, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 4 * width,
  vocab_size = 512, max_position_embeddings = seq, hidden_dropout_prob = 0, attention_probs_dropout_prob = 0 }

-- the pass's plans, from one layer of a model of the same shape
local probe = slapo.models.bert(config, { init = false })
slapo.no_grad(function() probe(slapo.randint(0, 512, { 1, 13 })) end)
local layer = slapo.create_schedule(probe)["bert.encoder.layer.0"]
local device = arg and arg[3] or "cpu"
local cluster = ("1x%d:%s"):format(world, device)
local function plan(opts)
  local o = { ranks = world, batch = batch, seq = seq, cluster = cluster }
  for k, v in pairs(opts) do o[k] = v end
  return slapo.autoshard(layer, o)
end
local rows = {
  { name = "time, whole tokens", plan = plan({}) },
  { name = "time, sequence parallel", plan = plan({ sequence = true }) },
  { name = "volume (Slapo's), sequence parallel", plan = plan({ sequence = true, objective = "volume" }) },
}
probe, layer = nil, nil
collectgarbage()

local ids = slapo.randint(0, 512, { batch, seq })
slapo.dist.broadcast(ids, 0)
for _, row in ipairs(rows) do
  slapo.manual_seed(1)
  local sch = slapo.create_schedule(slapo.models.bert(config))
  for _, l in ipairs(sch["bert.encoder.layer"]:children()) do row.plan:apply(l) end
  local model = slapo.build(sch)
  local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
  row.step = timing.time(function()
    optimizer:zero_grad()
    model(ids, { labels = ids }):backward()
    optimizer:step()
  end, 2, 7)
  row.key = row.plan.strategy["attention.self.key"]
  model, optimizer, sch = nil, nil, nil
  collectgarbage()
end

if rank == 0 then
  local base = rows[2].step
  print(("BERT, %d layers of width %d, batch %d x seq %d, %d Gloo ranks, AdamW, predicted on %s; %s"):format(
    config.num_hidden_layers, width, batch, seq, world, device, os.date("%Y-%m-%d")))
  print("| objective | attention's keys | predicted layer s | forward volume (elements) | measured step s | step / time, sequence parallel |")
  print("|---|---|---|---|---|---|")
  for _, row in ipairs(rows) do
    print(("| %s | %s | %.4f | %.0f | %.3f | %.2f |"):format(row.name, row.key, row.plan.step_s, row.plan.volume,
      row.step, row.step / base))
  end
end
