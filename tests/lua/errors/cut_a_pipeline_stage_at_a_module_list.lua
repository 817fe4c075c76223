-- expect: cut_pipeline_stage: 'transformer.h' is a ModuleList, which its parent never calls as a whole (it calls the layers one by one); cut after one of its layers, e.g. sch["transformer.h.0"]
-- A cut at a ModuleList, which its parent never calls as a whole: refused at the cut, not at the first step.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h"]:cut_pipeline_stage() end)
