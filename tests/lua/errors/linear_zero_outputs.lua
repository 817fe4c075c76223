-- expect: nn.Linear: out_features must be a positive integer, got 0
-- A Linear with no outputs: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.nn.Linear(4, 0) end)
