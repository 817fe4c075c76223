-- Resident memory over a long slapo.train run (no collectgarbage() anywhere): the tensor memory
-- Lua's boxes hold is collected by its own pressure, so memory stays flat.
--   slapo-lua run bench/memory_soak.lua [steps] [vocab]      (defaults: 10000 8192)
local steps, vocab = tonumber(arg[1] or 10000), tonumber(arg[2] or 8192)
slapo.manual_seed(0)
local model = slapo.models.gpt2({ n_embd = 64, n_layer = 2, n_head = 4, vocab_size = vocab, n_positions = 64 })
local ids = slapo.randint(0, vocab, { 8, 64 })
local marks, rows = {}, {}
for _, f in ipairs({ 0.01, 0.1, 0.25, 0.5, 0.75, 1.0 }) do marks[math.max(1, math.floor(f * steps))] = true end
local started = slapo.clock()
slapo.train({ model = model, steps = steps, lr = 1e-3, quiet = true, data = function() return ids end,
  on_step = function(step)
    if marks[step] then
      local logits = model(ids)  -- a vocab-wide tensor held by Lua, then dropped, every marked step
      rows[#rows + 1] = { step, slapo.memory_mib(), slapo.tensor_gc_stats().collections, logits:numel() }
    end
  end })
print(("GPT-2 (n_embd 64, 2 layers, vocab %d), batch 8 x 64, %d steps in %.0f s"):format(vocab, steps,
  slapo.clock() - started))
print("| step | resident MiB | vs first mark | collections so far |")
print("|---|---|---|---|")
for _, r in ipairs(rows) do
  print(("| %d | %.0f | %.2f | %d |"):format(r[1], r[2], r[2] / rows[1][2], r[3]))
end
