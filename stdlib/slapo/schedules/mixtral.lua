--- MixtralForCausalLM: Megatron's tensor parallelism of attention (LLaMA's, grouped-query heads
--- included) and expert parallelism of every layer's sparse MoE block, as a schedule.
---
--- Example usage (4 ranks: attention over 2 tensor-parallel ranks, experts over 2 replicas):
---   local layout = slapo.parallel.layout({ tp = 2, ep = 2 })
---   local sch = slapo.create_schedule(model, { group = layout.tp_group })
---   require("slapo.schedules.mixtral").schedule(sch, { ep_group = layout.ep_group, checkpoint = 1.0 })
--- The router and each expert stay whole: under tensor parallelism every rank of a TP group routes
--- the same tokens and runs the same experts (Megatron splits experts by TP only with sequence
--- parallelism, which this schedule does not do).
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "model.layers"

local function layer(decoder_layer)
  common.attention(decoder_layer["self_attn"], { "q_proj", "k_proj", "v_proj" }, "o_proj")
end

-- fuse: both RMSNorms in their kernel (the experts' SwiGLU runs on the rows routed to each expert).
local function fuse(decoder_layer, _, use)
  common.fuse_rms_norms(decoder_layer, use)
end

--- opts: as slapo.schedules.llama's (tp, checkpoint, fuse, layer), and ep_group: the group to spread
--- every MoE block's experts over (shard_experts; a layout's ep_group), none to keep them whole.
function M.schedule(sch, opts)
  opts = opts or {}
  if opts.ep_group then  -- before megatron's checkpointing wraps the layers
    for _, decoder_layer in ipairs(sch[M.layers]:children()) do
      decoder_layer["block_sparse_moe"]:shard_experts({ group = opts.ep_group })
    end
  end
  return common.megatron(sch, opts, { layers = M.layers, layer = layer, fuse = fuse,
    embedding = "model.embed_tokens", head = "lm_head" })
end

return M
