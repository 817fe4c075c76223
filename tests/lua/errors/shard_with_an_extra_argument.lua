-- expect: shard on 'transformer.h.0.mlp.c_fc': takes 3 arguments, got 4 (the form is sub:shard(param, axis [, {groups = n}]))
-- Shard given a fourth argument: refused, not logged with it dropped.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard("weight", 1, { groups = 1 }, "extra") end)
