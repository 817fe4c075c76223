-- expect: sync: unknown mode '5' for 'transformer.h.0' (choices: fwd_pre, fwd_post, bwd_post, bwd_params)
-- Sync with a number for the mode: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0"]:sync(5, "all_reduce") end)
