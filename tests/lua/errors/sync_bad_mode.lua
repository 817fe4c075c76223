-- expect: sync: unknown mode 'forward' for 'fc2' (choices: fwd_pre, fwd_post, bwd_post, bwd_params)
-- Slapo's modes are fwd_pre, fwd_post and bwd_post.
local sch = slapo.create_schedule(slapo.models.mlp({ hidden_size = 8 }))
require("slapo.must_fail").refuses(sch, function() sch["fc2"]:sync("forward", "all_reduce") end)
