-- expect: optim.grad_scaler: unknown option 'scale' (valid: init_scale, growth_factor, backoff_factor, growth_interval)
-- A misspelt grad_scaler option is refused like the optimizers'.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.optim.grad_scaler({ scale = 1 }) end)
