-- expect: shard on 'transformer.h.0.mlp.c_fc': axis must be an integer from -64 to 63, got NaN
-- Shard an axis of NaN: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard("weight", 0 / 0) end)
