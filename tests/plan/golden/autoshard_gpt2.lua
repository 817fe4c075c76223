-- autoshard: 4 projections and 32 other ops chosen by the cbc ILP (76 variables, 120 constraints)
-- predicted 0.00387789 s and 2154.0 MiB per device (all replicated: 0.00648274 s, 3988.1 MiB)
return function(sch)
  sch["attn.c_attn"]:shard("weight", 1, { groups = 3 }):shard("bias", 0, { groups = 3 }):sync("bwd_post", "all_reduce")
  sch["attn.c_proj"]:shard("weight", 0):sync("fwd_post", "all_reduce")
  sch["mlp.c_fc"]:shard("weight", 1):shard("bias", 0):sync("bwd_post", "all_reduce")
  sch["mlp.c_proj"]:shard("weight", 0):sync("fwd_post", "all_reduce")
  sch["attn.attn_dropout"]:fork_rng()
end
