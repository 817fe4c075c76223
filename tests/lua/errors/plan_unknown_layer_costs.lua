-- expect: plan: --layer-costs 'alpa' is not a pricing (choices: ilp, megatron)
-- plan with a layer pricing it does not have: refused before anything is traced.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.plan("gpt2", { cluster = "1x2:cpu", layer_costs = "alpa" }) end)
