-- expect: parallel.cut_evenly: the number of stages must be a whole number of at least 1, got 0
-- Cutting a layer list into 0 stages: refused, and the schedule unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() require("slapo.parallel").cut_evenly(sch, "transformer.h", 0) end)
