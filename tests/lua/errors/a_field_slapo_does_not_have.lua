-- expect: slapo has no field 'tokenizer'; GPT-2's byte-level BPE tokenizer is require('slapo.bpe') (slapo.help() lists its functions)
-- slapo.tokenizer: a field slapo does not have is an error that says so, not a nil.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() return slapo.tokenizer.load("x") end)
