-- expect: schedule: no module 'atn' under 'transformer.h.0' (did you mean 'attn'?); its children are: ln_1, attn, ln_2, mlp
-- A typo in a module path: the error names the closest child.
local model = slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2, vocab_size = 10, n_positions = 8 })
local sch = slapo.create_schedule(model)
require("slapo.must_fail").refuses(sch, function() return sch["transformer.h.0.atn.c_attn"] end)
