-- expect: Tensor '*': The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1 (operands [2, 3] and [4])
-- t * u with shapes that do not broadcast: the operator and both operands are named.
local must_fail = require("slapo.must_fail")
local t = slapo.zeros({ 2, 3 })
must_fail.refuses(nil, function() return t * slapo.zeros({ 4 }) end)
