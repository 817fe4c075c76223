--- MixtralForCausalLM: Megatron's tensor parallelism of attention (LLaMA's, grouped-query heads
--- included) and expert parallelism of every layer's sparse MoE block, as a schedule.
---
--- Example usage (4 ranks: attention over 2 tensor-parallel ranks, experts over 2 replicas):
---   local layout = slapo.parallel.layout({ tp = 2, ep = 2 })
---   local sch = slapo.create_schedule(model, { group = layout.tp_group })
---   require("slapo.schedules.mixtral").schedule(sch, { ep_group = layout.ep_group, checkpoint = 1.0 })
--- Under tensor parallelism every rank of a TP group routes the same tokens (the router stays whole)
--- and each expert is split as LLaMA's MLP is (w1, w3 column-parallel, w2 row-parallel, the
--- expert's input gradient and output all-reduced over the group), so a rank holds 1/tp of each of
--- its experts: Megatron's expert tensor parallelism at its default, the TP size.
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer list (plan scripts cut and checkpoint there too).
M.layers = "model.layers"

local function layer(decoder_layer, opts)
  common.attention(decoder_layer["self_attn"], { "q_proj", "k_proj", "v_proj" }, "o_proj")
  if opts.experts_whole then return end
  -- each expert is called once a step on every rank (on no rows too), so its syncs match everywhere
  for _, expert in ipairs(decoder_layer["block_sparse_moe.experts"]:children()) do
    common.column(expert["w1"], { sync_input = false })
    common.column(expert["w3"], { sync_input = false })
    expert:sync("bwd_post", "all_reduce")
    common.row(expert["w2"])
  end
end

-- fuse: both RMSNorms in their kernel (the experts' SwiGLU runs on the rows routed to each expert).
local function fuse(decoder_layer, _, use)
  common.fuse_rms_norms(decoder_layer, use)
end

--- opts: as slapo.schedules.llama's (tp, checkpoint, fuse, layer), and ep_group: the group to spread
--- every MoE block's experts over (shard_experts; a layout's ep_group), none to keep them all on
--- each rank. Experts whose intermediate_size the TP group does not divide stay whole (a note).
function M.schedule(sch, opts)
  opts = opts or {}
  if opts.ep_group then  -- before megatron's checkpointing wraps the layers
    for _, decoder_layer in ipairs(sch[M.layers]:children()) do
      decoder_layer["block_sparse_moe"]:shard_experts({ group = opts.ep_group })
    end
  end
  local notes = {}
  local inner = (slapo.models.config(sch.mod) or {}).intermediate_size
  local split = {}
  for k, v in pairs(opts) do split[k] = v end
  if sch.world_size > 1 and inner and inner % sch.world_size ~= 0 then
    split.experts_whole = true
    table.insert(notes, ("experts' intermediate_size %d does not divide by %d ranks; experts stay whole on each"):format(
      inner, sch.world_size))
  end
  for _, note in ipairs(common.megatron(sch, split, { layers = M.layers, layer = layer, fuse = fuse,
    embedding = "model.embed_tokens", head = "lm_head" })) do
    table.insert(notes, note)
  end
  return notes
end

return M
