-- expect: sync: mode 'bwd_params' on 'transformer.h.0.ln_1': no parameter 'bais' (valid: weight, bias)
-- A bwd_params sync naming a parameter the module does not have: refused, the valid names listed.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0.ln_1"]:sync("bwd_params", "all_reduce", { params = { "bais" } })
end)
