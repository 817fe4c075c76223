-- expect: F.mse_loss: input [2, 3] and target [3] differ in shape; reshape or expand one to the other
-- F.mse_loss of [2, 3] against [3]: refused, not broadcast into a loss nobody meant.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.F.mse_loss(slapo.zeros({ 2, 3 }), slapo.zeros({ 3 })) end)
