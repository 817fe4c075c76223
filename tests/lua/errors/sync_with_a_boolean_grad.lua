-- expect: sync: grad for 'transformer.h.0.mlp' must be "slice" or "reduce_scatter", got a boolean
-- Sync with grad = true: refused, naming the two choices.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:sync("fwd_post", "all_gather", { axis = -1, grad = true }) end)
