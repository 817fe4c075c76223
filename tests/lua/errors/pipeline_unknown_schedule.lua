-- expect: build: pipeline.schedule: unknown pipeline schedule 'zero-bubble' (choices: "1f1b", "gpipe")
-- The schedules a pipeline runs are GPipe and 1F1B (interleaved when a rank holds several chunks).
local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32 }))
sch["transformer.h.0"]:cut_pipeline_stage()
require("slapo.must_fail").refuses(sch, function()
  slapo.build(sch, { pipeline = { schedule = "zero-bubble" } })
end)
