-- expect: set_rng_states: no module with a fork_rng stream at 'transformer.h.0.mlp' (valid: 'transformer.h.0.attn.attn_dropout')
-- Restoring a random stream a module does not have: refused, naming the modules that have one.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0.attn.attn_dropout"]:fork_rng(1)
must_fail.refuses(sch, function()
  sch.mod:set_rng_states({ ["transformer.h.0.mlp"] = slapo.rng_state() })
end)
