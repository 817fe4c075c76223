--- Megatron-style tensor parallelism for GPT2LMHeadModel, as a schedule.
---
--- Example usage:
---   local gpt2 = require("slapo.schedules.gpt2")
---   local sch = slapo.create_schedule(model, { group = tp_group })
---   gpt2.schedule(sch, { checkpoint = 0.5 })     -- prints nothing; see sch:log() and tostring(sch)
local common = require("slapo.schedules.common")
local M = {}

--- opts: tp (default true when the group has more than one rank), checkpoint (fraction of
--- layers, default 0), fork_rng (default true). Returns notes about what was left out.
function M.schedule(sch, opts)
  opts = opts or {}
  local notes = {}
  local layers = sch["transformer.h"]:children()
  if sch.world_size > 1 and opts.tp ~= false then
    for _, layer in ipairs(layers) do
      -- c_attn holds q, k and v side by side: each rank keeps its heads of each.
      common.column(layer["attn.c_attn"], { groups = 3 })
      common.row(layer["attn.c_proj"])
      if opts.fork_rng ~= false then
        layer["attn.attn_dropout"]:fork_rng()
      end
      common.column(layer["mlp.c_fc"])
      common.row(layer["mlp.c_proj"])
    end
    local ok, why = common.vocab_parallel(sch["transformer.wte"], sch["lm_head"])
    if not ok then
      table.insert(notes, why)
    end
  end
  common.checkpoint_layers(layers, opts.checkpoint)
  return notes
end

return M
