-- expect: train: 'data' must be a function(step, micro) returning token ids, {tokens = file, batch =, seq =} or {vocab =, batch =, seq =}, got string
-- data must be a function, a token file's {tokens, batch, seq} or {vocab, batch, seq}.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.train({ model = must_fail.gpt2(), steps = 1, data = "text" }) end)
