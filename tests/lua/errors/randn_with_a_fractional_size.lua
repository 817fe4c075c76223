-- expect: randn: shape entry 2 must be a whole number (a size, or -1 where a view infers it), got 1.5
-- A size of 1.5 is refused, not truncated.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.randn({ 2, 1.5 }) end)
