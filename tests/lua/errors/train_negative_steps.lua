-- expect: train: steps must be an integer >= 1, got -1
-- A negative step count for train: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function()
  slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8 }, steps = -1 })
end)
