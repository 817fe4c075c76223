-- expect: manual_seed: seed must be an integer from -9000000000000000 to 9000000000000000, got 0.5
-- manual_seed(0.5): refused, not truncated to seed 0.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.manual_seed(0.5) end)
