-- expect: shard on 'transformer.h.0.mlp.c_fc': the parameter name comes first, then the axis: sub:shard("weight", 1)
-- Shard with its arguments swapped (the axis first): refused, showing the call in the right order.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard(1, "weight") end)
