-- expect: cut_pipeline_stage: 'transformer.h.0' already ends a stage
-- Cut a pipeline stage twice: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
sch["transformer.h.0"]:cut_pipeline_stage()
must_fail.refuses(sch, function() sch["transformer.h.0"]:cut_pipeline_stage() end)
