-- expect: train: optimizer is a name (adamw, sgd, zero_adamw) that train builds with lr and weight_decay, got an optimizer
-- train given an optimizer object: refused, saying it takes a name.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8 }, steps = 1, optimizer = slapo.optim.adamw(model, { lr = 1e-3 }) }) end)
