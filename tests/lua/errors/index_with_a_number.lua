-- expect: schedule: index with a module path string like sch["encoder.layer.0"], got number
-- Index with a number: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() return sch[5] end)
