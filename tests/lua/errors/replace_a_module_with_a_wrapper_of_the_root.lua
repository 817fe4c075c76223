-- expect: replace: cannot put an ancestor ('the root', a GPT2LMHeadModel) inside itself at 'transformer.h.0': the new Sequential contains it
-- Replace a module with a wrapper of the root: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0"]:replace(slapo.nn.Sequential({ sch.mod })) end)
