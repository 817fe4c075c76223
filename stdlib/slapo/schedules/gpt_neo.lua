--- Megatron-style tensor parallelism for GPTNeoForCausalLM, as a schedule: each rank keeps its
--- heads of q, k and v (global and local layers alike: the window is per position, so it needs no
--- sync) and its columns of the MLP.
---
--- Example usage:
---   require("slapo.schedules.gpt_neo").schedule(sch, { checkpoint = 0.5 })
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "transformer.h"

local function layer(block, opts)
  local attn = block["attn.attention"]
  common.attention(attn, { "q_proj", "k_proj", "v_proj" }, "out_proj")
  if opts.fork_rng ~= false then
    attn["attn_dropout"]:fork_rng()
  end
  common.column(block["mlp.c_fc"])
  common.row(block["mlp.c_proj"])
end

--- opts: tp (default true when the group has several ranks), checkpoint (fraction of layers,
--- default 0), fork_rng (default true), layer (see slapo.schedules.gpt2). GPT-Neo has no fused
--- kernels yet: fuse adds a note. Returns notes about what was left out.
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = M.layers, layer = layer,
    embedding = "transformer.wte", head = "lm_head" })
end

return M
