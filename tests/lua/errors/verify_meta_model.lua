-- expect: verify: the scheduled model's parameter 'transformer.wte.weight' is on the meta device (shapes, no values); materialise it first with slapo.build(sch), or build the model on cpu or cuda
-- verify of a model built on the meta device: a clear error instead of LibTorch's "Could not run ... 'Meta' backend".
local model = slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2, vocab_size = 32, n_positions = 16 }, { device = "meta" })
local sch = slapo.create_schedule(model)
-- (no state check: meta tensors hold no values to compare)
require("slapo.must_fail").refuses(nil, function()
  slapo.verify(sch, { slapo.randint(0, 32, { 1, 4 }) }, {}, function() end)
end)
