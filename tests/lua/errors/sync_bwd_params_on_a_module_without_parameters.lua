-- expect: sync: mode 'bwd_params' on 'transformer.h.0.attn.attn_dropout': the module has no parameters
-- Sync bwd_params on a module without parameters: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch["transformer.h.0.attn.attn_dropout"]:sync("bwd_params", "all_reduce")
end)
