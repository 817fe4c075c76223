-- expect: annotate on 'transformer.h.0.mlp.c_fc': the key must be a string, got the number 5
-- A number for annotate's key (it would be stored as its digits): refused, the schedule unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:annotate("weight", 5, "v") end)
