-- expect: save_tensors: the metadata must be a table of strings {key = "value"}, got string
-- save_tensors with a string for its metadata: refused, not dropped.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.save_tensors("/tmp/slapo-must-fail.safetensors", { a = slapo.ones({ 2 }) }, "meta") end)
