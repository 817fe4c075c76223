-- LLaMA (grouped-query attention, RoPE, SwiGLU) with Megatron tensor parallelism, a few AdamW steps.
--   slapo-lua run examples/llama_schedule.lua
--   slapo-lua run --nproc 2 examples/llama_schedule.lua                     # TP = 2
--   slapo-lua run --nproc 4 examples/llama_schedule.lua --tp 2              # TP = 2 x DP = 2
--   slapo-lua run --nproc 4 examples/llama_schedule.lua --tp 2 --pp 2 --schedule gpipe
local train = require("_train")
local opts = train.options({ tp = 0, steps = 5, layers = 4, hidden = 256, heads = 8, kv_heads = 4, vocab = 8192,
  seq = 64, batch = 4, checkpoint = 0.0, lr = 1e-3, seed = 0, fuse = 0 })
train.knobs(opts)  -- checkpoint, batch and tp, for slapo-lua tune

train.run(opts, function(o)
  return slapo.models.llama({ hidden_size = o.hidden, num_hidden_layers = o.layers, num_attention_heads = o.heads,
    num_key_value_heads = o.kv_heads, intermediate_size = 688, vocab_size = o.vocab })
end, function(sch, o)
  -- --fuse 1: the kernels that beat the unfused ops on the device; --fuse 2: all of them
  return require("slapo.schedules.llama").schedule(sch, { checkpoint = o.checkpoint,
    fuse = o.fuse == 2 and "all" or o.fuse > 0, device = o.device ~= "" and o.device or slapo.dist.device() })
end, { layers = "model.layers" })
