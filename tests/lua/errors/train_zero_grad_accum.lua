-- expect: train: grad_accum must be an integer >= 1, got 0
-- No gradient accumulation steps: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function()
  slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8 }, grad_accum = 0 })
end)
