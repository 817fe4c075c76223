-- expect: parallel.layout: unknown option 'tpp' (valid: tp, dp, pp, ep, cp)
-- A rank layout with a misspelt degree (tpp): refused, naming the valid ones.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() require("slapo.parallel").layout({ tpp = 1 }) end)
