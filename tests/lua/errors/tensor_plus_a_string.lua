-- expect: Tensor '+': both sides must be tensors or numbers, got string on the right
-- A tensor plus a string: the operator and what it takes are named.
local must_fail = require("slapo.must_fail")
local t = slapo.tensor({ 1, 2 })
must_fail.refuses(nil, function() return t + "a" end)
