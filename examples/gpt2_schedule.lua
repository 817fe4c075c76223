-- GPT-2 with Megatron tensor parallelism (and data parallelism across TP groups), a few AdamW steps.
--   slapo-lua run examples/gpt2_schedule.lua
--   slapo-lua run --nproc 2 examples/gpt2_schedule.lua                      # TP = 2
--   slapo-lua run --nproc 4 examples/gpt2_schedule.lua --tp 2 --checkpoint 0.5
--   slapo-lua run --nproc 4 examples/gpt2_schedule.lua --tp 2 --pp 2          # TP = 2 x PP = 2 (1F1B)
--   slapo-lua run --nproc 2 examples/gpt2_schedule.lua --pp 2 --chunks 2      # interleaved 1F1B
--   slapo-lua run --nproc 2 examples/gpt2_schedule.lua --fuse 1 --dropout 0   # slapo.op kernels
local train = require("_train")
local opts = train.options({ tp = 0, steps = 5, layers = 4, hidden = 256, heads = 8, vocab = 8192, seq = 64, batch = 4,
  checkpoint = 0.0, lr = 1e-3, seed = 0, dropout = 0.1, fuse = 0 })
train.knobs(opts)  -- checkpoint, batch and tp, for slapo-lua tune

train.run(opts, function(o)
  return slapo.models.gpt2({ n_embd = o.hidden, n_layer = o.layers, n_head = o.heads, vocab_size = o.vocab,
    n_positions = math.max(o.seq, 64), resid_pdrop = o.dropout, embd_pdrop = o.dropout, attn_pdrop = o.dropout })
end, function(sch, o)
  -- --fuse 1: the kernels that beat the unfused ops on the device; --fuse 2: all of them
  return require("slapo.schedules.gpt2").schedule(sch, { checkpoint = o.checkpoint,
    fuse = o.fuse == 2 and "all" or o.fuse > 0, device = o.device ~= "" and o.device or slapo.dist.device() })
end, { layers = "transformer.h" })
