-- expect: annotate: 'transformer.h.0.mlp.c_fc' (Conv1D) has no parameter '1'; its parameters are: weight, bias
-- Annotate with a number for a name: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:annotate(1, 2) end)
