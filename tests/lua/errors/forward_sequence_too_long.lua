-- expect: GPT2Model: a sequence of 20 tokens is longer than n_positions 16 (the position embedding's rows)
-- A sequence longer than the position table: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() model(slapo.randint(0, 32, { 1, 20 })) end)
