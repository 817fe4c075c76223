-- expect: zeros: unknown dtype 'float31' (choices: float32, float64, float16, bfloat16, int64, int32, int8, uint8, bool)
-- A misspelt dtype: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.zeros({ 2 }, { dtype = "float31" }) end)
