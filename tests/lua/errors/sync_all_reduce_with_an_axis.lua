-- expect: sync on 'transformer.h.0.mlp': all_reduce sums whole tensors and takes no axis (axis goes with all_gather, reduce_scatter and scatter)
-- An axis on an all-reduce: refused by name instead of ignored.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:sync("fwd_post", "all_reduce", { axis = 1 }) end)
