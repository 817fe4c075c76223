--- Megatron-style tensor parallelism for LlamaForCausalLM (grouped-query attention included), as
--- a schedule.
---
--- Example usage:
---   require("slapo.schedules.llama").schedule(sch, { checkpoint = 1.0 })
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "model.layers"

local function layer(decoder_layer)
  common.attention(decoder_layer["self_attn"], { "q_proj", "k_proj", "v_proj" }, "o_proj")
  local mlp = decoder_layer["mlp"]
  common.column(mlp["gate_proj"], { sync_input = false })
  common.column(mlp["up_proj"], { sync_input = false })
  mlp:sync("bwd_post", "all_reduce")
  common.row(mlp["down_proj"])
end

-- fuse: SwiGLU and both RMSNorms in their kernels.
local function fuse(decoder_layer, tp, use)
  local op = require("slapo.op")
  if use("swiglu") then
    common.replace_fused(decoder_layer["mlp"], op.FusedLlamaMLP, tp)  -- the MLP's own bwd_post sync moves along
  end
  common.fuse_rms_norms(decoder_layer, use)
end

--- opts: tp, checkpoint (fraction of layers), fuse (slapo.op kernels: true for those that win on
--- the model's device, "all", default false), layer (see slapo.schedules.gpt2). Key/value heads
--- must divide by the group size.
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = M.layers, layer = layer, fuse = fuse,
    embedding = "model.embed_tokens", head = "lm_head" })
end

return M
