-- expect: build: pipeline options were given, but the schedule has no cut_pipeline_stage; cut the stages first (sub:cut_pipeline_stage() or slapo.parallel.cut_evenly), or drop pipeline
-- Pipeline options for a schedule with no cut: refused, not built into a plain module.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.build(sch, { pipeline = { micro_batches = 2 } }) end)
