-- expect: shard: 'transformer.h.0.mlp.c_fc' (Conv1D) has no parameter 'wieght' (did you mean 'weight'?); its parameters are: weight, bias
-- Shard a parameter that does not exist: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard("wieght", 1) end)
