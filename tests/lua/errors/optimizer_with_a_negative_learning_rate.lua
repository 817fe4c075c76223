-- expect: optim.sgd: option 'lr' must be from 0 to 1e+06, got -1
-- Optimizer with a negative learning rate: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.optim.sgd(sch.mod, { lr = -1 }) end)
