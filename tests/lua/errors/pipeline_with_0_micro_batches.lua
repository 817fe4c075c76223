-- expect: build: pipeline.micro_batches must be an integer from 1 to 1048576, got 0
-- A pipeline of 0 micro-batches is refused (leaving micro_batches out gives one per stage).
local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32 }))
sch["transformer.h.0"]:cut_pipeline_stage()
require("slapo.must_fail").refuses(sch, function()
  slapo.build(sch, { pipeline = { micro_batches = 0 } })
end)
