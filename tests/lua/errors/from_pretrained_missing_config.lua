-- expect: from_pretrained: '/' has no config.json (is it a Hugging Face model directory?)
-- from_pretrained of a directory with no config.json: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.models.from_pretrained("/") end)
