-- expect: shard: 'weight' of 'transformer.h.1.mlp.c_fc' is already sharded along axis 1; a parameter is sharded once
-- Shard a parameter twice: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.1.mlp.c_fc"]:shard("weight", 0) end)
