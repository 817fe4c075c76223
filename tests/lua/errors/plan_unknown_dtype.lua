-- expect: plan: --dtype 'fp8' is not a training precision (choices: float32, bfloat16)
-- plan with a precision it does not know: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.plan("gpt2", { dtype = "fp8" }) end)
