-- expect: create_schedule: unknown option 'grop' (valid: group)
-- A misspelt create_schedule option: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.create_schedule(model, { grop = 1 }) end)
