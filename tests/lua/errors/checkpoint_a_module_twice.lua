-- expect: checkpoint: 'transformer.h.0' (GPT2Block) is already checkpointed
-- Checkpoint a module twice: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0"]:checkpoint()
must_fail.refuses(sch, function() sch["transformer.h.0"]:checkpoint() end)
