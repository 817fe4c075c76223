-- expect: replace_all: type name must be a string, got number
-- Replace_all with a number for the type: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch:replace_all(5, function(m) return m end) end)
