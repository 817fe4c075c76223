-- expect: train: autocast: unknown autocast dtype 'fp8' (valid: bf16, bfloat16, fp16, float16)
-- Train under an autocast dtype that does not exist: refused at the call, not blamed on the data.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8 }, steps = 1, autocast = "fp8" }) end)
