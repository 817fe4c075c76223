-- expect: nn.Sequential: the modules come as one array, nn.Sequential{a, b, ...}, got slapo.Module
-- nn.Sequential(a, b), PyTorch's spelling: refused with the table form.
local must_fail = require("slapo.must_fail")
local nn = slapo.nn
must_fail.refuses(nil, function() nn.Sequential(nn.Linear(4, 4), nn.ReLU()) end)
