--- The masked-language-model objective of BERT, RoBERTa and ALBERT, for slapo.train's
--- `masked_lm = {probability =, mask_id =, vocab =}`: as transformers' DataCollatorForLanguageModeling,
--- each token is chosen with `probability` (default 0.15); of the chosen, 80% are shown as
--- `mask_id`, 10% as a random token of the vocabulary and 10% as they are, and the loss is over the
--- chosen tokens alone (labels -100 elsewhere). The draws come from the default random stream, so a
--- run resumed from a training checkpoint masks as the uninterrupted run did.
local M = {}

--- The spec with its defaults, or an error naming what is wrong; `vocab` defaults to the model's
--- config (vocab_size).
function M.check(spec, model)
  if type(spec) ~= "table" then
    error(("train: masked_lm must be a table {probability = 0.15, mask_id = N}, got %s"):format(type(spec)), 0)
  end
  for key in pairs(spec) do
    if key ~= "probability" and key ~= "mask_id" and key ~= "vocab" then
      error(("train: masked_lm has no option '%s' (options: probability, mask_id, vocab)"):format(tostring(key)), 0)
    end
  end
  local config = model and slapo.models.config(model)
  local out = { probability = spec.probability or 0.15, mask_id = spec.mask_id,
    vocab = spec.vocab or (config and config.vocab_size) }
  if type(out.probability) ~= "number" or not (out.probability > 0 and out.probability < 1) then
    error(("train: masked_lm.probability must be a number between 0 and 1 (exclusive), got %s"):format(
      tostring(out.probability)), 0)
  end
  if type(out.vocab) ~= "number" or out.vocab ~= math.floor(out.vocab) or out.vocab < 2 then
    error(("train: masked_lm.vocab (the vocabulary random replacements come from) must be an integer >= 2, got %s%s")
      :format(tostring(out.vocab), spec.vocab == nil and " (the model's config names no vocab_size: give it)" or ""), 0)
  end
  if type(out.mask_id) ~= "number" or out.mask_id ~= math.floor(out.mask_id) or out.mask_id < 0
    or out.mask_id >= out.vocab then
    error(("train: masked_lm.mask_id must be the mask token's id, an integer from 0 to %d, got %s"):format(
      out.vocab - 1, tostring(out.mask_id)), 0)
  end
  return out
end

--- inputs, labels for token ids [batch, seq] under the checked spec.
function M.mask(ids, spec)
  local shape = ids:size()
  local chosen = slapo.rand(shape):lt(spec.probability):long()
  local how = slapo.rand(shape)
  local masked = chosen * how:lt(0.8):long()
  local random = chosen * how:ge(0.8):long() * how:lt(0.9):long()
  local replacement = slapo.randint(0, spec.vocab, shape)
  local inputs = ids + (spec.mask_id - ids) * masked + (replacement - ids) * random
  local labels = (ids + 100) * chosen - 100
  return inputs:long(), labels:long()
end

return M
