-- expect: shard: 'transformer.h.0.mlp.c_fc' (Conv1D) has no parameter '5'; its parameters are: weight, bias
-- Shard a parameter named by a number: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard(5, 0) end)
