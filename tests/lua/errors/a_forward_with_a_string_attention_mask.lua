-- expect: GPT2LMHeadModel: keyword 'attention_mask' must be a tensor, got String
-- A model call with attention_mask = "x": the model and the keyword are named.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch.mod(slapo.randint(0, 32, { 2, 8 }), { attention_mask = "x" }) end)
