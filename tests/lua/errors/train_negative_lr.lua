-- expect: train: lr must be a finite number >= 0, got -0.1
-- A negative learning rate for train: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function()
  slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8 }, lr = -0.1 })
end)
