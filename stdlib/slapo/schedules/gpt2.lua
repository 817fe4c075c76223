--- Megatron-style tensor parallelism for GPT2LMHeadModel, as a schedule.
---
--- Example usage:
---   local sch = slapo.create_schedule(model, { group = tp_group })
---   require("slapo.schedules.gpt2").schedule(sch, { checkpoint = 0.5 })   -- see sch:log(), tostring(sch)
local common = require("slapo.schedules.common")
local M = {}

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

--- opts: tp (default true when the group has several ranks), checkpoint (fraction of layers,
--- default 0), fork_rng (default true). Returns notes about what was left out.
function M.schedule(sch, opts)
  return common.megatron(sch, opts, { layers = "transformer.h", layer = layer, embedding = "transformer.wte",
    head = "lm_head" })
end

return M
