-- expect: train: data: unknown option 'bacth' (valid: vocab, batch, seq)
-- Synthetic data with a misspelt size (bacth): refused before any step.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8, bacth = 4 }, steps = 1 }) end)
