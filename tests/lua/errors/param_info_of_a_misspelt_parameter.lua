-- expect: param_info: 'transformer.h.0.mlp.c_fc' (Conv1D) has no parameter 'wieght' (did you mean 'weight'?); its parameters are: weight, bias
-- param_info names the module and the closest parameter.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:param_info("wieght") end)
