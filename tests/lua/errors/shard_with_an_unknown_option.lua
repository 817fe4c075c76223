-- expect: shard on 'transformer.h.0.mlp.c_fc': unknown option 'groupz' (valid: groups)
-- Shard with an unknown option: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard("weight", 1, { groupz = 2 }) end)
