-- expect: replace: cannot replace the root module; create a schedule over the new model instead
-- Replace the root: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch:replace(slapo.nn.Identity()) end)
