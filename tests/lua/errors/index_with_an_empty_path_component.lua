-- expect: schedule: no module '' under 'transformer' (did you mean 'h'?); its children are: wte, wpe, drop, h, ln_f
-- Index with an empty path component: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() return sch["transformer..h"] end)
