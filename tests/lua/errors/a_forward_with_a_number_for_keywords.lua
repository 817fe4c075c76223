-- expect: GPT2LMHeadModel: the second argument is a table of keywords (labels =, attention_mask =), got Int
-- model(ids, 5): the second argument is the keywords table; a number is refused, not ignored.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch.mod(slapo.randint(0, 32, { 2, 8 }), 5) end)
