-- expect: Tensor:sum: keepdim must be true or false, got the string 'yes'
-- keepdim = "yes": refused, not read as true.
local must_fail = require("slapo.must_fail")
local t = slapo.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
must_fail.refuses(nil, function() t:sum(0, "yes") end)
