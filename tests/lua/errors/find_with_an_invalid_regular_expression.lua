-- expect: find: '(' is not a valid regular expression (Mismatched '(' and ')' in regular expression)
-- Find with an invalid regular expression: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) } })
must_fail.refuses(sch, function() sch["transformer.h.0"]:find("(") end)
