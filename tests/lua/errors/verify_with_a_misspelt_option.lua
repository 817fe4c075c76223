-- expect: verify: unknown option 'rtoll' (valid: rtol, atol, backward, train, seed, labels, allow_missing)
-- Verify with a misspelt option: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.verify(sch, { slapo.randint(0, 32, { 1, 4 }) }, { rtoll = 1 }) end)
