-- expect: in 'transformer': GPT2Model: input_ids must be token ids [batch, seq], got a tensor of shape [4]
-- A forward on one-dimensional ids: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch.mod(slapo.randint(0, 32, { 4 })) end)
