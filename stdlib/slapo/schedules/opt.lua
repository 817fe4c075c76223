--- Megatron-style tensor parallelism for OPTForCausalLM, as a schedule: each rank keeps its heads
--- of q, k and v and its columns of fc1; out_proj and fc2 are row-parallel. The learned position
--- embedding and opt-350m's project_in / project_out stay whole on every rank.
---
--- Example usage:
---   require("slapo.schedules.opt").schedule(sch, { checkpoint = 1.0 })
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "model.decoder.layers"

local function layer(decoder_layer, opts)
  local attn = decoder_layer["self_attn"]
  common.attention(attn, { "q_proj", "k_proj", "v_proj" }, "out_proj")
  if opts.fork_rng ~= false then
    attn["dropout"]:fork_rng()
  end
  common.column(decoder_layer["fc1"])
  common.row(decoder_layer["fc2"])
end

--- opts: tp, checkpoint (fraction of layers), fork_rng (default true), layer (see
--- slapo.schedules.gpt2). OPT has no fused kernels yet: fuse adds a note.
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = M.layers, layer = layer,
    embedding = "model.decoder.embed_tokens", head = "lm_head" })
end

return M
