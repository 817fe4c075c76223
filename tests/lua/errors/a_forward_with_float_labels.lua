-- expect: GPT2LMHeadModel: labels must be integer token ids (int64) of input_ids' shape [2, 8], got Float of shape [2, 8]
-- A model call with float labels: refused with what labels must be.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch.mod(slapo.randint(0, 32, { 2, 8 }), { labels = slapo.randn({ 2, 8 }) }) end)
