-- expect: config: gpt2 field 'n_layer' must be an integer from 1 to 4096, got "two"
-- A config.json field of the wrong type is named with its value.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.models.gpt2({ n_layer = "two" }) end)
