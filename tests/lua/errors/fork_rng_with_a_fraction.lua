-- expect: fork_rng on 'transformer.h.0.attn.attn_dropout': seed must be an integer from 0 to 9000000000000000, got 1.5
-- Fork_rng with a fraction: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.attn.attn_dropout"]:fork_rng(1.5) end)
