-- expect: zeros: unknown device 'gpu' (devices: cpu, cuda, cuda:N, meta)
-- zeros on device "gpu": refused, listing the devices slapo-lua runs on (not every LibTorch backend).
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.zeros({ 2 }, { device = "gpu" }) end)
