-- expect: verify: the original model's 'transformer.wte.weight' is on the meta device (shapes, no values) but the scheduled model has values, so the two cannot be compared; verify an empty model before slapo.build (verify gives both build's values), or build both
-- An empty model whose check function builds it: the original stays empty, the scheduled one has
-- values; a clear error instead of LibTorch's "Could not run ... 'Meta' backend".
local model = slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2, vocab_size = 32, n_positions = 16 }, { device = "meta" })
local sch = slapo.create_schedule(model)
-- (no state check: building inside fn is what is refused, and verify rolls back fn's primitives only)
require("slapo.must_fail").refuses(nil, function()
  slapo.verify(sch, { slapo.randint(0, 32, { 1, 4 }) }, {}, function(s) slapo.build(s) end)
end)
