-- expect: shard: axis 5 is out of range for 'weight' of 'transformer.h.0.mlp.c_fc' with shape [16, 64] (valid: 0 .. 1)
-- Shard an axis out of range: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard("weight", 5) end)
