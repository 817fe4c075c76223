-- expect: slapo has no field 'from_pretrained'; it is slapo.models.from_pretrained (slapo.help() lists its functions)
-- slapo.from_pretrained: the error says where it lives (slapo.models.from_pretrained).
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() return slapo.from_pretrained("x") end)
