-- A small RoBERTa learns State of the Union addresses as a masked language model, with the
-- tokenizer RoBERTa ships: GPT-2's byte-level BPE behind RoBERTa's four specials (<s> 0, <pad> 1,
-- </s> 2, <unk> 3, then GPT-2's tokens, and <mask> last; RoBERTa's own vocabulary orders the
-- merges' tokens differently, which a model trained from scratch does not see). Padding is id 1,
-- so positions count from 2 as RoBERTa's do. slapo.train's masked_lm objective hides 15% of the
-- tokens (80% <mask>, 10% random, 10% kept) and the loss is over them.
--   build/slapo-lua run examples/roberta_sotu.lua [--steps 300] [--texts 20]
--   build/slapo-lua plot roberta_sotu.jsonl
local train = require("_train")
local text = require("slapo.text")
local bpe = require("slapo.bpe").load(text.data_dir() .. "/gpt2-bpe")
local specials = 4
local gpt2_tokens = 50257
local tokenizer = {
  eos_id = 2,  -- </s> between addresses
  encode = function(_, s)
    local ids = bpe:encode(s)
    for i = 1, #ids do ids[i] = ids[i] + specials end
    return ids
  end,
}
local mask_id = specials + gpt2_tokens
train.sotu(train.sotu_options({ metrics = "roberta_sotu.jsonl" }), function(o)
  return slapo.models.roberta({ vocab_size = mask_id + 1, pad_token_id = 1, hidden_size = o.hidden,
    num_hidden_layers = o.layers, num_attention_heads = o.heads, intermediate_size = 4 * o.hidden,
    max_position_embeddings = o.seq + 2 })
end, { tokenizer = tokenizer, masked_lm = { mask_id = mask_id } })
