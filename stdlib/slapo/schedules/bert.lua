--- Megatron-style tensor parallelism for BertLMHeadModel and BertForMaskedLM, as a schedule.
---
--- Example usage:
---   require("slapo.schedules.bert").schedule(sch, { checkpoint = 0.5 })
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "bert.encoder.layer"

--- One layer's Megatron layout (RoBERTa's layers are the same).
function M.layer(bert_layer, opts)
  local self_attn = bert_layer["attention.self"]
  -- q, k, v share one input: one all-reduce of its gradient, on the attention module.
  for _, name in ipairs({ "query", "key", "value" }) do
    common.column(self_attn[name], { sync_input = false })
  end
  self_attn:sync("bwd_post", "all_reduce")
  if opts.fork_rng ~= false then
    self_attn["dropout"]:fork_rng()
  end
  common.row(bert_layer["attention.output.dense"])
  common.column(bert_layer["intermediate.dense"])
  common.row(bert_layer["output.dense"])
end

-- fuse: scale + mask + softmax of the self-attention in one kernel, and dropout + residual +
-- LayerNorm after each dense in another.
local function fuse(bert_layer, tp, use)
  local op = require("slapo.op")
  if use("masked_softmax") then
    -- the module-level input-gradient all-reduce of q, k and v moves to the replacement
    common.replace_fused(bert_layer["attention.self"], op.FusedQKVAttention, tp)
  end
  if use("bias_dropout_add_layer_norm") then
    for _, path in ipairs({ "attention.output", "output" }) do  -- their row-parallel dense keeps its syncs
      bert_layer[path]:replace(op.FusedBertOutput(bert_layer[path].mod))
    end
  end
end

--- opts: tp, checkpoint (fraction of layers), fork_rng (see slapo.schedules.gpt2), fuse (slapo.op
--- kernels: true for those that win on the model's device, "all", default false), layer (see
--- slapo.schedules.gpt2).
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = M.layers, layer = M.layer, fuse = fuse,
    embedding = "bert.embeddings.word_embeddings", head = "cls.predictions.decoder",
    head_bias_owner = "cls.predictions" })
end

return M
