--- Megatron-style tensor parallelism for GPT2LMHeadModel, as a schedule.
---
--- Example usage:
---   local sch = slapo.create_schedule(model, { group = tp_group })
---   require("slapo.schedules.gpt2").schedule(sch, { checkpoint = 0.5 })   -- see sch:log(), tostring(sch)
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "transformer.h"

local function layer(block, opts)
  -- c_attn holds q, k and v side by side: each rank keeps its heads of each.
  common.column(block["attn.c_attn"], { groups = 3 })
  common.row(block["attn.c_proj"])
  if opts.fork_rng ~= false then
    block["attn.attn_dropout"]:fork_rng()
  end
  common.column(block["mlp.c_fc"])
  common.row(block["mlp.c_proj"])
end

-- fuse: the MLP's bias + tanh GELU in one kernel; the attention core in the memory-efficient
-- kernel when the layer has no attention dropout (the kernel applies none).
local function fuse(block, tp, use)
  local op = require("slapo.op")
  if use("bias_gelu") then
    -- FusedGPT2MLP reads c_fc's weight itself, so its column-parallel input sync moves to the MLP
    common.replace_fused(block["mlp"], op.FusedGPT2MLP, tp)
  end
  if not use("attention") then
    return {}
  end
  if tostring(block["attn.attn_dropout"].mod):match("p=0%)") then
    block["attn"]:replace(op.FusedGPT2Attention(block["attn"].mod))  -- c_attn, c_proj keep their syncs
    return {}
  end
  return { block.path .. ".attn: attention dropout is on, so the fused attention kernel is not used" }
end

--- opts: tp (default true when the group has several ranks), checkpoint (fraction of layers,
--- default 0), fork_rng (default true), fuse (slapo.op kernels: true for those that win on the
--- model's device, "all", default false), layer (a function(layer_schedule) that lays out each
--- layer instead of Megatron's layout: a plan script's shard_layer). Returns notes about what was
--- left out.
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = M.layers, layer = layer, fuse = fuse,
    embedding = "transformer.wte", head = "lm_head" })
end

return M
