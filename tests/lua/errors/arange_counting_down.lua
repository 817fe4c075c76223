-- expect: arange: end (1) is below start (5); arange counts up from start to end - 1
-- arange(5, 1): refused with both bounds, not ATen's step-sign wording.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.arange(5, 1) end)
