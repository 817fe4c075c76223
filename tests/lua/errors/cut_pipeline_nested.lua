-- expect: cut_pipeline_stage: 'transformer.h.0' contains 'transformer.h.0.mlp', which already ends a stage; cut after modules that do not contain each other
-- Stages are consecutive runs of modules, so one cut cannot sit inside another.
local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32 }))
sch["transformer.h.0.mlp"]:cut_pipeline_stage()
require("slapo.must_fail").refuses(sch, function() sch["transformer.h.0"]:cut_pipeline_stage() end)
