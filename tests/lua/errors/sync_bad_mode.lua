-- expect: sync: unknown mode 'forward' for 'fc2' (choices: fwd_pre, fwd_post, bwd_post, bwd_params)
-- Slapo's modes are fwd_pre, fwd_post and bwd_post.
local sch = slapo.create_schedule(slapo.models.mlp({ hidden_size = 8 }))
sch["fc2"]:sync("forward", "all_reduce")
