-- expect: replace: the replacement for 'transformer.h.0.mlp' must be a module, got number (build one with slapo.nn or slapo.nn.Module{...})
-- Replace with a number: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:replace(5) end)
