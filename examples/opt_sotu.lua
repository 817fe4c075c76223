-- A small OPT learns State of the Union addresses with the tokenizer OPT ships (GPT-2's byte-level
-- BPE; OPT's vocabulary has 50272 rows). Positions come from the attention mask, offset by 2.
--   slapo-lua run examples/opt_sotu.lua [--steps 300] [--texts 20]
--   slapo-lua plot opt_sotu.jsonl
local train = require("_train")
train.sotu(train.sotu_options({ metrics = "opt_sotu.jsonl" }), function(opts)
  return slapo.models.opt({ hidden_size = opts.hidden, num_hidden_layers = opts.layers,
    num_attention_heads = opts.heads, ffn_dim = 4 * opts.hidden, max_position_embeddings = opts.seq })
end)
