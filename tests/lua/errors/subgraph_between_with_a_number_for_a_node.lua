-- expect: subgraph.between: bad argument #3 'to': a node of the graph or its name ("%39") expected, got number
-- subgraph.between with a node index where a node or its name goes: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local subgraph = require("slapo.subgraph")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 4, 16 }) } })
local graph = sch["transformer.h.0.mlp"]:graph()
must_fail.refuses(sch, function() subgraph.between(graph, graph.nodes[1], 3) end)
