-- expect: sync: {grad = "reduce_scatter"} on 'transformer.h.0.mlp' belongs to a fwd_pre or fwd_post all_gather
-- A reduce-scattered gradient asked of an all-reduce: refused, and the schedule unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0.mlp"]:sync("fwd_post", "all_reduce", { grad = "reduce_scatter" })
end)
