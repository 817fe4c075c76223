-- expect: sync on 'transformer.h.0.mlp': options must be a table, got number (e.g. {name = value})
-- Sync with a number for options: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:sync("fwd_post", "all_gather", 2) end)
