-- The intra-op pass's ILP at the size of whole models: GPT-2 of 12, 24 and 48 layers (the widths
-- of gpt2, gpt2-medium and gpt2-xl, vocabulary cut to 1024 so the weights stay small), traced whole
-- and solved in one ILP on a 4 x 8 mesh (tp 4, dp 8) of simulated H100s over two nodes, batch 64 x
-- seq 1024, with no budget and with a budget 2% below what the unbudgeted plan holds (so it binds). Enumerating
-- every projection's three styles would take 3^n plans (3^49 for 12 layers). Per row: the problem's
-- size, the solver's wall time (the trace, with its copy of the model, comes on top), and what the
-- plan shards.
--   slapo-lua run bench/autoshard_scale.lua
local models = {
  { name = "gpt2 (12 x 768)", n_layer = 12, n_embd = 768, n_head = 12 },
  { name = "gpt2-medium (24 x 1024)", n_layer = 24, n_embd = 1024, n_head = 16 },
  { name = "gpt2-xl (48 x 1600)", n_layer = 48, n_embd = 1600, n_head = 25 },
}
print(("autoshard: whole GPT-2 models in one ILP (solver: %s), tp 4 x dp 8 on 4x8:h100, batch 64 x seq 1024, %s"):format(
  slapo.ilp_solver, os.date("%Y-%m-%d")))
print("| model | projections | other ops | ILP variables | constraints | budget | solve s | trace + solve s | sharded | ZeRO-1 | MiB per device (replicated) | predicted s (replicated) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for _, m in ipairs(models) do
  local model = slapo.models.gpt2({ n_layer = m.n_layer, n_embd = m.n_embd, n_head = m.n_head, vocab_size = 1024,
    n_positions = 1024 }, { init = false })
  local ids = slapo.zeros({ 1, 16 }, { dtype = "int64" })
  slapo.no_grad(function() model(ids) end)
  local sch = slapo.create_schedule(model)
  local free
  for _, budget in ipairs({ false, 0.98 }) do
    local opts = { ranks = 4, dp = 8, cluster = "4x8:h100", batch = 64, seq = 1024 }
    if budget then opts.memory_mib = free.memory_mib * budget end
    local start = slapo.clock()
    local ok, p = pcall(slapo.autoshard, sch, opts)
    local seconds = slapo.clock() - start
    if not ok then
      print(("| %s | | | | | %s | | %.2f | %s | | | |"):format(m.name,
        budget and ("%.0f MiB"):format(opts.memory_mib) or "none", seconds, tostring(p):gsub("\n.*", "")))
      break
    end
    free = free or p
    local projections, sharded = 0, 0
    for _, style in pairs(p.strategy) do
      projections = projections + 1
      if style ~= "replicated" then sharded = sharded + 1 end
    end
    local ops = tonumber(p.source:match("projections and (%d+) other ops"))
    print(("| %s | %d | %d | %d | %d | %s | %.2f | %.2f | %d | %s | %.0f (%.0f) | %.4f (%.4f) |"):format(m.name,
      projections, ops, p.variables, p.constraints, budget and ("%.0f MiB"):format(opts.memory_mib) or "none",
      p.solve_s, seconds, sharded,
      p.zero and "yes" or "no", p.memory_mib, p.replicated_memory_mib, p.step_s, p.replicated_s))
  end
end
