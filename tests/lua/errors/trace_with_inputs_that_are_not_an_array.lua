-- expect: trace: inputs for 'transformer.h.0.mlp' must be an array of tensors {x, ...}, got number
-- Trace with inputs that are not an array: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:trace({ inputs = 5 }) end)
