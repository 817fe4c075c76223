-- expect: build: options must be a table, got number (e.g. {name = value})
-- build's options as a number: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.build(slapo.create_schedule(model), 5) end)
