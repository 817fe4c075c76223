-- expect: shard: cannot split 'weight' of 'transformer.h.0.attn.c_attn' along axis 1 into 5 sections: size 48 is not divisible by 5
-- c_attn holds 3 sections (q, k, v), not 5.
local model = slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2, vocab_size = 10, n_positions = 8 })
local sch = slapo.create_schedule(model)
require("slapo.must_fail").refuses(sch, function()
  sch["transformer.h.0.attn.c_attn"]:shard("weight", 1, { groups = 5 })
end)
