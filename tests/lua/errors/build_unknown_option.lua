-- expect: build: unknown option 'sead' (valid: init_weights, seed, pipeline)
-- A misspelt build option: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.build(slapo.create_schedule(model), { sead = 1 }) end)
