-- expect: shard on 'transformer.h.0.mlp.c_fc': options must be a table, got string (e.g. {name = value})
-- Shard with a string for options: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard("weight", 1, "groups=2") end)
