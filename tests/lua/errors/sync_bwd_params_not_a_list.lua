-- expect: sync on 'transformer.h.0.ln_1': params must be an array of strings, got string
-- A bwd_params sync whose params is a string, not a list of names: refused, naming the module.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0.ln_1"]:sync("bwd_params", "all_reduce", { params = "bias" })
end)
