-- expect: trace: leaves for 'transformer.h.0' must be an array of module paths or type names, got string
-- Trace with leaves as a string: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) }, leaves = "mlp" })
end)
