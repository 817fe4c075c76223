-- expect: plan: max_stages must be an integer from 0 to 1048576, got -1
-- plan with a negative stage limit: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.plan("gpt2", { max_stages = -1 }) end)
