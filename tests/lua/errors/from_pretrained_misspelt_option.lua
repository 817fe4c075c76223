-- expect: models.from_pretrained: unknown option 'devcie' (valid: device, dtype)
-- A misspelt option is refused instead of silently loading the whole model on the CPU.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.models.from_pretrained("/nonexistent/x", { devcie = "meta" }) end)
