-- expect: build: seed must be an integer from 0 to 9000000000000000, got 1.5
-- Build with seed 1.5: refused, not truncated to another stream.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.build(sch, { init_weights = true, seed = 1.5 }) end)
