-- expect: verify: option 'rtol' must be from 0 to 1e+06, got -1
-- Verify with a negative tolerance: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.verify(sch, { slapo.randint(0, 32, { 1, 4 }) }, { rtol = -1 }) end)
