-- expect: GPT2LMHeadModel: input_ids must be integer token ids (int64), got Float of shape [1, 4]
-- A forward on float ids: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch.mod(slapo.randn({ 1, 4 })) end)
