-- expect: autograd.gather_from: dim (of a 2-d tensor) must be an integer from -2 to 1, got 9
-- dist.autograd.gather_from along dim 9 of a 2-d tensor: refused in its own name.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.dist.autograd.gather_from(slapo.randn({ 2, 3 }), 9) end)
