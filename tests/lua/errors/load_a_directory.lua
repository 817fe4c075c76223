-- expect: load: '/tmp' is a directory; load reads one TorchScript file (a Hugging Face checkpoint folder loads with slapo.from_pretrained)
-- slapo.load of a directory: named as one, with from_pretrained for checkpoint folders.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.load("/tmp") end)
