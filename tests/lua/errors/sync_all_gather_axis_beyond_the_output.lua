-- expect: sync(fwd_post) on 'transformer.h.0.mlp': axis 7 is out of range for the module's 3-d output (valid: -3 .. 2)
-- An all_gather axis beyond the module's output: the rank is known at the forward, whose error names the sync.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0.mlp"]:sync("fwd_post", "all_gather", { axis = 7 })
must_fail.refuses(sch, function() return sch.mod(slapo.randint(0, 32, { 1, 4 })) end)
