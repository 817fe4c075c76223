-- expect: config: gpt2 field 'n_embd' must be an integer from 1 to 16777216, got NaN
-- A config with n_embd = NaN: refused by the model's own range check.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function()
  slapo.models.gpt2({ n_embd = 0 / 0, n_head = 2, n_layer = 2, vocab_size = 32, n_positions = 16 })
end)
