--- Megatron-style tensor parallelism for RobertaForMaskedLM, as a schedule: BERT's layer layout
--- (the encoders are the same), the vocabulary split over the word embedding and lm_head's
--- decoder. The position embedding stays whole. slapo.op's fused BERT kernels are not applied
--- (fuse adds a note).
---
--- Example usage:
---   require("slapo.schedules.roberta").schedule(sch, { checkpoint = 0.5 })
local bert = require("slapo.schedules.bert")
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "roberta.encoder.layer"

--- opts: tp, checkpoint (fraction of layers), fork_rng, layer (see slapo.schedules.gpt2).
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = M.layers, layer = bert.layer,
    embedding = "roberta.embeddings.word_embeddings", head = "lm_head.decoder", head_bias_owner = "lm_head" })
end

return M
