-- expect: slapo has no field 'bpe'; it is a module of its own: require('slapo.bpe') (slapo.help() lists its functions)
-- slapo.bpe: a field slapo does not have is an error that says so, not a nil.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() return slapo.bpe.load("x") end)
