-- expect: find on 'transformer.h.0.mlp': a path regular expression takes no options ({inputs =, modules =} go with a pattern function), got a table
-- A path regex takes no options: options are refused, not ignored.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:find("c_fc", { modulez = true }) end)
