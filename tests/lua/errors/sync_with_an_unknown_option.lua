-- expect: sync on 'transformer.h.0.mlp': unknown option 'axs' (valid: axis, grad, params)
-- Sync with an unknown option: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:sync("fwd_post", "all_reduce", { axs = 1 }) end)
