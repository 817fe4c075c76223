-- expect: autoshard: 'transformer.h.1' has not run yet, so its inputs are unknown; run the model once or pass {inputs = {x, ...}}
-- Autoshard a module that has not run: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.autoshard(sch["transformer.h.1"]) end)
