-- autoshard: 7 projections and 66 other ops chosen by the cbc ILP (251 variables, 757 constraints)
-- predicted 0.00757553 s and 4013.0 MiB per device (all replicated: 0.0114131 s, 5706.1 MiB)
return function(sch)
  sch:sync("fwd_pre", "scatter", { axis = 1 })
  sch["mlp.down_proj"]:sync("bwd_params", "all_reduce") -- whole weights on this rank's tokens
  sch["mlp.gate_proj"]:sync("bwd_params", "all_reduce") -- whole weights on this rank's tokens
  sch["mlp.up_proj"]:sync("bwd_params", "all_reduce") -- whole weights on this rank's tokens
  sch["self_attn.k_proj"]:shard("weight", 0)
  sch["self_attn.o_proj"]:shard("weight", 1):sync("fwd_post", "reduce_scatter", { axis = 1 })
  sch["self_attn.q_proj"]:shard("weight", 0)
  sch["self_attn.v_proj"]:shard("weight", 0)
  sch["self_attn"]:sync("fwd_pre", "all_gather", { axis = 1, grad = "reduce_scatter" })
  sch["input_layernorm"]:sync("bwd_params", "all_reduce")
  sch["post_attention_layernorm"]:sync("bwd_params", "all_reduce")
  sch:sync("fwd_post", "all_gather", { axis = 1 })
end
