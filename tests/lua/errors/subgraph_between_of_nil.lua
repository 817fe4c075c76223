-- expect: subgraph.between: bad argument #1 'graph': a traced graph (sub:graph()) expected, got nil
-- subgraph.between with nil for the graph (a module never traced, or a misspelt variable): refused by
-- name, and the schedule unchanged.
local must_fail = require("slapo.must_fail")
local subgraph = require("slapo.subgraph")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() subgraph.between(nil, "%1", "%2") end)
