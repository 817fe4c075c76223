-- expect: optim.adamw: unknown option 'lrr' (valid: lr, weight_decay, eps, beta1, beta2, impl)
-- Optimizer with a misspelt option: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.optim.adamw(sch.mod, { lrr = 1 }) end)
