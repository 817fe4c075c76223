-- expect: sync: unknown op 'allreduce' for 'transformer.h.0.mlp' (choices: all_reduce, all_gather, reduce_scatter, scatter, a reshard scheme such as "RS->SR", or a function; schemes: RR->RR, RR->RS, RR->SR, RS->RR, RS->RS, RS->SR, SR->RR, SR->RS, SR->SR)
-- Sync an unknown collective: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:sync("fwd_post", "allreduce") end)
