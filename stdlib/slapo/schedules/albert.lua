--- Megatron-style tensor parallelism for AlbertForMaskedLM, as a schedule. ALBERT's layers are
--- shared: each group's layers are laid out once and every application of the group runs sharded.
--- AlbertAttention adds its own input back (the residual lives inside it), so q, k and v each
--- all-reduce their input gradient rather than the module once (three all-reduces, not one).
---
--- Example usage:
---   require("slapo.schedules.albert").schedule(sch, { checkpoint = 1.0 })
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its list of shared layer groups (checkpointed as units).
M.layers = "albert.encoder.albert_layer_groups"

local function layer(group, opts)
  for _, albert_layer in ipairs(group["albert_layers"]:children()) do
    local attn = albert_layer["attention"]
    for _, name in ipairs({ "query", "key", "value" }) do
      common.column(attn[name])
    end
    common.row(attn["dense"])
    if opts.fork_rng ~= false then
      attn["attention_dropout"]:fork_rng()
    end
    common.column(albert_layer["ffn"])
    common.row(albert_layer["ffn_output"])
  end
end

--- opts: tp, checkpoint (fraction of the layer groups), fork_rng, layer (see slapo.schedules.gpt2:
--- here a function of one group's schedule).
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = M.layers, layer = layer,
    embedding = "albert.embeddings.word_embeddings", head = "predictions.decoder", head_bias_owner = "predictions" })
end

return M
