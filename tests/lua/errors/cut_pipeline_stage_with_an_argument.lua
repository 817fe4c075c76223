-- expect: cut_pipeline_stage on 'transformer.h.0': takes 0 arguments, got 1 (the form is sub:cut_pipeline_stage())
-- Cut_pipeline_stage given a stage count it does not take: refused, not run with the argument dropped.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0"]:cut_pipeline_stage(2) end)
