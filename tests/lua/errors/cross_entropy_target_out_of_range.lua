-- expect: F.cross_entropy: target 7 is out of range for 5 classes (valid: 0 .. 4, or -100 to ignore)
-- F.cross_entropy with a class past the logits: the class and the valid range are named.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function()
  slapo.F.cross_entropy(slapo.randn({ 2, 5 }), slapo.tensor({ 7, 1 }, { dtype = "int64" }))
end)
