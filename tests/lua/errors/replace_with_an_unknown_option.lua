-- expect: replace on 'transformer.h.0.mlp': a subgraph is what find returns (an array of nodes), got a table with key 'nmae' (options come after the subgraph)
-- Replace with an unknown option: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0.mlp"]:replace(slapo.nn.Identity(), { nmae = "x" })
end)
