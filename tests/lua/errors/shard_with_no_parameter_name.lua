-- expect: shard on 'transformer.h.0.mlp.c_fc': the parameter name must be a string, got nothing (parameters: weight, bias)
-- shard(nil, 0): the module and its parameters are named.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:shard(nil, 0) end)
