--- Megatron-style tensor parallelism for BertLMHeadModel, as a schedule.
---
--- Example usage:
---   require("slapo.schedules.bert").schedule(sch, { checkpoint = 0.5 })
local common = require("slapo.schedules.common")
local M = {}

--- opts: tp, checkpoint (fraction of layers), fork_rng (see slapo.schedules.gpt2).
function M.schedule(sch, opts)
  opts = opts or {}
  local notes = {}
  local layers = sch["bert.encoder.layer"]:children()
  if sch.world_size > 1 and opts.tp ~= false then
    for _, layer in ipairs(layers) do
      local self_attn = layer["attention.self"]
      -- q, k, v share one input: one all-reduce of its gradient, on the attention module.
      for _, name in ipairs({ "query", "key", "value" }) do
        common.column(self_attn[name], { sync_input = false })
      end
      self_attn:sync("bwd_post", "all_reduce")
      if opts.fork_rng ~= false then
        self_attn["dropout"]:fork_rng()
      end
      common.row(layer["attention.output.dense"])
      common.column(layer["intermediate.dense"])
      common.row(layer["output.dense"])
    end
    local ok, why = common.vocab_parallel(sch["bert.embeddings.word_embeddings"], sch["cls.predictions.decoder"],
      sch["cls.predictions"])
    if not ok then
      table.insert(notes, why)
    end
  end
  common.checkpoint_layers(layers, opts.checkpoint)
  return notes
end

return M
