-- expect: sync: mode 'bwd_params' on 'transformer.h.0.ln_1' all-reduces parameter gradients; op must be 'all_reduce'
-- Sync bwd_params with a collective other than all_reduce: refused, and the schedule, its log and
-- its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0.ln_1"]:sync("bwd_params", "all_gather", { axis = 0 })
end)
