-- expect: F.softmax(x, dim): dim is required, e.g. F.softmax(x, -1) over the last of x's 2 dims; got none
-- F.softmax(x) without dim: refused (PyTorch's implicit dim is deprecated and guesses wrong on 3-d inputs).
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.F.softmax(slapo.randn({ 2, 3 })) end)
