-- expect: autoshard: 'transformer.h.0' needs at least 1.4 MiB per device on 2 x 2 ranks (tp x dp, ZeRO-1); memory_mib is 0.01
-- Autoshard under a memory budget no assignment meets: refused, naming memory_mib and the least
-- memory any plan needs, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  slapo.autoshard(sch["transformer.h.0"], { ranks = 2, dp = 2, memory_mib = 0.01, inputs = { slapo.randn({ 1, 8, 16 }) } })
end)
