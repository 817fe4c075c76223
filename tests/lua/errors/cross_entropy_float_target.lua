-- expect: F.cross_entropy: the target (class ids) must hold integer ids (int64), got float32 of shape [2]
-- F.cross_entropy with float class ids: refused with what the target must hold.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.F.cross_entropy(slapo.randn({ 2, 5 }), slapo.tensor({ 1, 2 })) end)
