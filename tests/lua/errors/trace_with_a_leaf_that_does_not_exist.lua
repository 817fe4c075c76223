-- expect: trace: leaf 'mpl' is neither a path below 'transformer.h.0' nor the type of a module there
-- Trace with a leaf that does not exist: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) }, leaves = { "mpl" } })
end)
