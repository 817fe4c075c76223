-- expect: checkpoint on 'transformer.h.0': a subgraph is what find returns (an array of nodes, or of such arrays), got number
-- Checkpoint with an argument it does not take: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0"]:checkpoint(3) end)
