-- expect: trace: leaves[1] must be a module path or type name (a string), got number
-- Trace with a leaf that is a number: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) }, leaves = { 5 } })
end)
