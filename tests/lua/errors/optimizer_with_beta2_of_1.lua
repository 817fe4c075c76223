-- expect: optim.adamw: option 'beta2' must be from 0 to 0.999999, got 1
-- Optimizer with beta2 of 1: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.optim.adamw(sch.mod, { beta2 = 1 }) end)
