-- expect: trace: 'transformer.h.0': recursive and flatten exclude each other (flatten inlines the children that recursive would trace one by one)
-- Trace recursive and flatten at once: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0"]:trace({ inputs = { slapo.randn({ 2, 4, 16 }) }, recursive = true, flatten = true })
end)
