-- expect: nn.Linear: unknown option 'bais' (valid: bias)
-- A Linear with a misspelt option (bais): refused, naming the valid one.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.nn.Linear(4, 4, { bais = false }) end)
