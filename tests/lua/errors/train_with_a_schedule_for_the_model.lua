-- expect: train: 'model' must be a module or a pipeline (a schedule's is sch.mod, or slapo.build(sch)), got slapo.Schedule
-- slapo.train given a schedule says where its module is.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.train({ model = sch, steps = 1, data = { vocab = 32, batch = 1, seq = 4 } }) end)
