-- expect: shard on 'transformer.h.0.attn.c_attn': groups must be an integer from 1 to 1048576, got 0
-- Shard into 0 groups: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.attn.c_attn"]:shard("weight", 1, { groups = 0 }) end)
