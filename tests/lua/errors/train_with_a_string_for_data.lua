-- expect: train: 'data' must be a function(step, micro) returning token ids, or {vocab =, batch =, seq =}, got string
-- data must be a function or {vocab, batch, seq}.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.train({ model = must_fail.gpt2(), steps = 1, data = "text" }) end)
