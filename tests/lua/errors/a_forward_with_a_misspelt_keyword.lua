-- expect: GPT2LMHeadModel: unknown keyword 'lables' (did you mean 'labels'?) (valid: labels, attention_mask)
-- A model call with {lables = ...}: refused with the keyword it meant, not run without the loss.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
local ids = slapo.randint(0, 32, { 2, 8 })
must_fail.refuses(sch, function() sch.mod(ids, { lables = ids }) end)
