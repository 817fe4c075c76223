-- expect: cut_pipeline_stage: the root module cannot end a stage; cut after a layer, e.g. sch["transformer.h.5"]:cut_pipeline_stage()
-- The root holds every stage; a cut ends one after a module inside it.
local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32 }))
sch:cut_pipeline_stage()
