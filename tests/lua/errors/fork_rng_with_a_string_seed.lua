-- expect: fork_rng: the seed for 'transformer.h.0.attn.attn_dropout' must be an integer, got string
-- Fork_rng with a string seed: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.attn.attn_dropout"]:fork_rng("x") end)
