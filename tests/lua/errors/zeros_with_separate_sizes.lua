-- expect: zeros: the shape is one table, slapo.zeros{2, 3}, got 2 separate numbers
-- zeros(2, 3), PyTorch's spelling: refused with the table form, not read as zeros{2}.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.zeros(2, 3) end)
