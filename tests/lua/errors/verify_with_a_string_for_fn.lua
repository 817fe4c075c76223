-- expect: verify: bad argument #4: a function(sch) that applies the primitives to check, got string
-- verify with a string where fn goes: named, not an attempt to call a string.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.verify(sch, { slapo.randint(0, 32, { 1, 4 }) }, {}, "fn") end)
