--- Megatron-style tensor parallelism for LlamaForCausalLM (grouped-query attention included), as
--- a schedule.
---
--- Example usage:
---   require("slapo.schedules.llama").schedule(sch, { checkpoint = 1.0 })
local common = require("slapo.schedules.common")
local M = {}

--- opts: tp, checkpoint (fraction of layers). Key/value heads must divide by the group size.
function M.schedule(sch, opts)
  opts = opts or {}
  local notes = {}
  local layers = sch["model.layers"]:children()
  if sch.world_size > 1 and opts.tp ~= false then
    for _, layer in ipairs(layers) do
      local attn = layer["self_attn"]
      for _, name in ipairs({ "q_proj", "k_proj", "v_proj" }) do
        common.column(attn[name], { sync_input = false })
      end
      attn:sync("bwd_post", "all_reduce")
      common.row(attn["o_proj"])
      local mlp = layer["mlp"]
      common.column(mlp["gate_proj"], { sync_input = false })
      common.column(mlp["up_proj"], { sync_input = false })
      mlp:sync("bwd_post", "all_reduce")
      common.row(mlp["down_proj"])
    end
    local ok, why = common.vocab_parallel(sch["model.embed_tokens"], sch["lm_head"])
    if not ok then
      table.insert(notes, why)
    end
  end
  common.checkpoint_layers(layers, opts.checkpoint)
  return notes
end

return M
