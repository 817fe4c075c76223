-- expect: Tensor:add_: the operand must be a tensor or a number, got string
-- t:add_("x"): refused in add_'s name, with what it takes.
local must_fail = require("slapo.must_fail")
local t = slapo.zeros({ 2 })
must_fail.refuses(nil, function() t:add_("x") end)
