-- expect: annotate on 'transformer.h.0.mlp.c_fc': the value must be a number, string, boolean or a table of those, got nothing (the form is sub:annotate(param, key, value))
-- Annotate with a key and no value: refused, not logged with nothing stored.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:annotate("weight", "k") end)
