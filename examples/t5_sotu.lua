-- A small T5 learns State of the Union addresses with T5's own pre-training objective, span
-- corruption (slapo.train's span_corruption): 15% of each row's tokens dropped in spans of 3 on
-- average, each span replaced by a sentinel in the encoder's input, and the decoder writes every
-- sentinel followed by the tokens it hid. The sentinels are T5's 100 extra ids, after the
-- tokenizer's pieces (<extra_id_0> the last id, as in T5's vocabulary).
--
-- The tokenizer: T5's own spiece.model where --tokenizer names a directory holding it (a T5
-- checkpoint's). T5's file is on neither npm nor Debian, so the default is the SentencePiece
-- unigram model of its kind that scripts/fetch-data brings: ALBERT's 30k-clean (fetched into
-- data/albert-tokenizer), ending each address with its [SEP].
--   build/slapo-lua run examples/t5_sotu.lua [--steps 300] [--texts 20] [--tokenizer DIR]
--   build/slapo-lua plot t5_sotu.jsonl
local train = require("_train")
local text = require("slapo.text")
local opts = train.sotu_options({ metrics = "t5_sotu.jsonl", tokenizer = "", kv = 32 })
local tokenizer = slapo.tokenizer(opts.tokenizer ~= "" and opts.tokenizer or text.data_dir() .. "/albert-tokenizer")
local extra_ids = 100
local sentinel = tokenizer.vocab_size + extra_ids - 1
train.sotu(opts, function(o)
  return slapo.models.t5({ vocab_size = tokenizer.vocab_size + extra_ids, d_model = o.hidden, d_kv = o.kv,
    d_ff = 4 * o.hidden, num_layers = o.layers, num_decoder_layers = o.layers, num_heads = o.heads,
    eos_token_id = tokenizer.eos_id, dropout_rate = 0.1 })
end, { tokenizer = tokenizer, span_corruption = { sentinel = sentinel, eos = tokenizer.eos_id } })
