-- BERT (BertLMHeadModel) with Megatron tensor parallelism, a few AdamW steps.
--   slapo-lua run examples/bert_schedule.lua
--   slapo-lua run --nproc 2 examples/bert_schedule.lua                      # TP = 2
--   slapo-lua run --nproc 4 examples/bert_schedule.lua --tp 2 --checkpoint 1
--   slapo-lua run --nproc 2 examples/bert_schedule.lua --pp 2 --micro 4     # two pipeline stages
local train = require("_train")
local opts = train.options({ tp = 0, steps = 5, layers = 4, hidden = 256, heads = 8, vocab = 8192, seq = 64, batch = 4,
  checkpoint = 0.0, lr = 1e-3, seed = 0, dropout = 0.1, fuse = 0 })
train.knobs(opts)  -- checkpoint, batch and tp, for slapo-lua tune

train.run(opts, function(o)
  return slapo.models.bert({ hidden_size = o.hidden, num_hidden_layers = o.layers, num_attention_heads = o.heads,
    intermediate_size = 4 * o.hidden, vocab_size = o.vocab, max_position_embeddings = math.max(o.seq, 64),
    hidden_dropout_prob = o.dropout, attention_probs_dropout_prob = o.dropout })
end, function(sch, o)
  -- --fuse 1: the kernels that beat the unfused ops on the device; --fuse 2: all of them
  return require("slapo.schedules.bert").schedule(sch, { checkpoint = o.checkpoint,
    fuse = o.fuse == 2 and "all" or o.fuse > 0, device = o.device ~= "" and o.device or slapo.dist.device() })
end, { layers = "bert.encoder.layer" })
