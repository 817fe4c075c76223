-- expect: F.silu: takes 1 argument, got 2 (the form is F.silu(x))
-- F.silu(x, true): the extra argument is refused, not ignored.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.F.silu(slapo.randn({ 2 }), true) end)
