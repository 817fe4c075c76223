-- The planner on 1,024 simulated H100s (128 nodes of 8, stdlib/devices/h100.json): GPT-3 39B and 175B,
-- batch 1536 x seq 2048 in bf16, with the intra-op pass pricing each layer ("ilp", the default) and with
-- Megatron's layout priced (nothing traced). Per row: the chosen plan, its predicted step, and how long
-- planning took: building and tracing one layer, the search, and the whole call. The plans are the cost
-- model's; the seconds are measured on the machine running it.
--   slapo-lua run bench/plan_1024.lua [CLUSTER] [BATCH] [SEQ]
local cluster, batch, seq = arg[1] or "128x8", tonumber(arg[2]) or 1536, tonumber(arg[3]) or 2048
local devices = tonumber(cluster:match("^(%d+)x")) * tonumber(cluster:match("x(%d+)$"))
local cases = {}
for _, model in ipairs({ "gpt3-39b", "gpt3-175b" }) do
  for _, pricing in ipairs({ "ilp", "megatron" }) do cases[#cases + 1] = { model = model, pricing = pricing } end
end

print(("The planner on %d simulated H100s (%s:h100), bfloat16, batch %d x seq %d, %s"):format(devices, cluster,
  batch, seq, os.date("%Y-%m-%d")))
print("| model | layer pricing | chosen plan | s/step (predicted) | trace s | search s | wall s |")
print("|---|---|---|---|---|---|---|")
local started = slapo.clock()
for n, c in ipairs(cases) do
  io.stderr:write(("plan_1024: %d/%d %s, %s pricing (%.0f s so far)\n"):format(n, #cases, c.model, c.pricing,
    slapo.clock() - started))
  local start = slapo.clock()
  local p = slapo.plan(c.model, { cluster = cluster .. ":h100", batch = batch, seq = seq, dtype = "bfloat16",
    layer_costs = c.pricing })
  local wall = slapo.clock() - start
  print(("| %s | %s | %s (%s) | %.4f | %.2f | %.2f | %.2f |"):format(c.model, c.pricing, p.name, p.origin, p.step_s,
    p.trace_s, p.search_s, wall))
end
