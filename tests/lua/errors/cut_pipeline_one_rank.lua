-- expect: build: 1 cut (transformer.h.0) makes 2 pipeline stages, but the pipeline group has 1 rank; a pipeline runs one stage per rank of its group (pipeline = {group = ...}), so cut 0 times or use a group of 2 ranks
-- One stage per rank of the pipeline group: alone, a run has one stage.
local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32 }))
sch["transformer.h.0"]:cut_pipeline_stage()
slapo.build(sch)
