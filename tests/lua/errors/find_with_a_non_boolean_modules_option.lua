-- expect: find on 'transformer.h.0.mlp': option 'modules' must be true or false, got string
-- Find with a non-boolean modules option: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 4, 16 }) } })
must_fail.refuses(sch, function()
  sch["transformer.h.0.mlp"]:find(function(x) return slapo.F.relu(x) end, { modules = "yes" })
end)
