-- expect: verify: option 'atol' must be from -1e+06 to 1e+06, got NaN
-- verify with atol = NaN: refused (every comparison with NaN is false), the schedule unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.verify(sch, { slapo.randint(0, 32, { 2, 8 }) }, { atol = 0 / 0 }) end)
