-- expect: decompose: 'transformer.h.0.ln_1' is a LayerNorm; decompose splits Linear and Conv1D into matmul + bias add
-- Decompose a LayerNorm: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.ln_1"]:decompose() end)
