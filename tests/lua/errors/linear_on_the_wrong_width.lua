-- expect: Linear: the input's last dimension is 3, expected 4 (in_features); input shape [2, 3]
-- A Linear(4, 4) on inputs 3 wide: both widths are named, not ATen's mat1/mat2.
local must_fail = require("slapo.must_fail")
local fc = slapo.nn.Linear(4, 4)
must_fail.refuses(fc, function() fc(slapo.zeros({ 2, 3 })) end)
