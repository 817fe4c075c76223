-- expect: decompose on 'transformer.h.0.mlp.c_fc': takes 0 arguments, got 1 (the form is sub:decompose())
-- Decompose given an argument it does not take: refused, not run with the argument dropped.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:decompose(5) end)
