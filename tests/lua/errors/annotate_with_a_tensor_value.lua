-- expect: annotate on 'transformer.h.0.mlp.c_fc': the value must be a number, string, boolean or a table of those, got a tensor (the schedule log replays annotations as Lua literals)
-- A tensor as an annotation value: the log could not replay it, so it is refused by name.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:annotate("weight", "k", slapo.zeros({ 2 })) end)
