-- expect: models.from_pretrained: '/nonexistent/x' is not a directory (a Hugging Face model directory holds config.json and model.safetensors)
-- from_pretrained of a path that does not exist says so, not that config.json is missing.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.models.from_pretrained("/nonexistent/x") end)
