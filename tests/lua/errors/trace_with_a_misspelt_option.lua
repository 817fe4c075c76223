-- expect: trace on 'transformer.h.0.mlp': unknown option 'input' (valid: inputs, leaves, flatten, recursive, fallback)
-- Trace with a misspelt option: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:trace({ input = 1 }) end)
