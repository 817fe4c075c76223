-- expect: plan: --seq 2048 is longer than gpt2's 1024 learned positions (n_positions); plan for --seq 1024 or less
-- plan GPT-2 for sequences its position embedding cannot index: refused before anything is traced.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.plan("gpt2", { cluster = "1x2:cpu", seq = 2048 }) end)
