-- expect: Tensor:view: the shape is one table, t:view{2, 3}, got 2 separate numbers
-- t:view(2, 3): refused with the table form, not read as view{2}.
local must_fail = require("slapo.must_fail")
local t = slapo.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
must_fail.refuses(nil, function() t:view(2, 3) end)
