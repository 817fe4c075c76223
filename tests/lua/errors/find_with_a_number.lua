-- expect: find on the root module: expected a regular expression over leaf paths (a string) or a pattern function, got number
-- Find with a number: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch:find(42) end)
