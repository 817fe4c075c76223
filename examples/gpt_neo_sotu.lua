-- A small GPT-Neo learns State of the Union addresses with the tokenizer GPT-Neo ships (GPT-2's
-- byte-level BPE): global and local attention layers alternate, the local ones seeing the last
-- --window tokens, as EleutherAI's GPT-Neo does with 256.
--   slapo-lua run examples/gpt_neo_sotu.lua [--steps 300] [--texts 20] [--window 16]
--   slapo-lua plot gpt_neo_sotu.jsonl
local train = require("_train")
train.sotu(train.sotu_options({ window = 16, metrics = "gpt_neo_sotu.jsonl" }), function(opts)
  if opts.layers % 2 ~= 0 then
    error(("gpt_neo_sotu: --layers %d must be even: the layers alternate global and local"):format(opts.layers), 0)
  end
  return slapo.models.gpt_neo({ hidden_size = opts.hidden, num_layers = opts.layers, num_heads = opts.heads,
    max_position_embeddings = opts.seq, window_size = opts.window,
    attention_types = { { { "global", "local" }, opts.layers / 2 } } })
end)
