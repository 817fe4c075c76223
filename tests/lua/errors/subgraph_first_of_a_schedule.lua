-- expect: subgraph.first: bad argument #1 'graph': a traced graph (sub:graph()) expected, got a schedule (its graph is sub:graph())
-- subgraph.first given the schedule instead of its graph: refused, saying where the graph is.
local must_fail = require("slapo.must_fail")
local subgraph = require("slapo.subgraph")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() subgraph.first(sch["transformer.h.0.mlp"], "aten::matmul") end)
