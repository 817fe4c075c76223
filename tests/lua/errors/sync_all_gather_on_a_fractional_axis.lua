-- expect: sync on 'transformer.h.0.mlp': axis must be an integer from -64 to 63, got 1.5
-- Sync all_gather on a fractional axis: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0.mlp"]:sync("fwd_post", "all_gather", { axis = 1.5 })
end)
