-- expect: schedule: no module '9' under 'transformer.h' (did you mean '0'?); its children are: 0, 1
-- Index a path that does not exist: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() return sch["transformer.h.9"] end)
