-- expect: subgraph.last: bad argument #2 'op': an op name ("aten::matmul") expected, got nil
-- subgraph.last with no op: refused by name rather than searching for a nil op.
local must_fail = require("slapo.must_fail")
local subgraph = require("slapo.subgraph")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 4, 16 }) } })
must_fail.refuses(sch, function() subgraph.last(sch["transformer.h.0.mlp"]:graph()) end)
