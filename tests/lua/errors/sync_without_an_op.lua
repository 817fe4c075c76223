-- expect: sync: op for 'transformer.h.0.mlp' must be one of all_reduce, all_gather, reduce_scatter, scatter, a reshard scheme such as "RS->SR", or a function; got nothing
-- Sync with a mode and no op: refused, listing the ops.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:sync("fwd_post") end)
