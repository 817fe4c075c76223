-- expect: cut_pipeline_stage: the root module cannot end a stage; cut after a layer, e.g. sch["transformer.h.5"]:cut_pipeline_stage()
-- Cut a pipeline stage at the root: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch:cut_pipeline_stage() end)
