-- expect: nn.Dropout: p must be in [0, 1], got 2
-- A dropout probability of 2: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.nn.Dropout(2) end)
