--- T5's pre-training objective, span corruption, for slapo.train's
--- `span_corruption = {density =, mean_span =, sentinel =, eos =}`, as T5's data pipeline (and
--- transformers' run_t5_mlm_flax.py) makes it. Of each row's L tokens, round(L x density) (default
--- 0.15) are dropped in round(dropped / mean_span) spans (mean_span default 3) placed at random,
--- the row starting with kept tokens; the encoder reads the kept tokens with each dropped span
--- replaced by one sentinel, and the decoder learns each sentinel followed by the span it hides.
--- Sentinels are T5's extra ids: `sentinel` is <extra_id_0>'s id, and the i-th span's sentinel is
--- sentinel - i. Both sides end with `eos` (default: the config's eos_token_id). Every row of a
--- length gets the same input and target lengths, so a batch stays one tensor. The draws come from
--- the default random stream, so a resumed run corrupts as the uninterrupted run did.
local M = {}

local function integer(value)
  return type(value) == "number" and value == math.floor(value)
end

--- The spec with its defaults, or an error naming what is wrong.
function M.check(spec, model)
  if type(spec) ~= "table" then
    error(("train: span_corruption must be a table {sentinel = N, density = 0.15, mean_span = 3}, got %s")
      :format(type(spec)), 0)
  end
  for key in pairs(spec) do
    if key ~= "density" and key ~= "mean_span" and key ~= "sentinel" and key ~= "eos" then
      error(("train: span_corruption has no option '%s' (options: density, mean_span, sentinel, eos)")
        :format(tostring(key)), 0)
    end
  end
  local config = model and slapo.models.config(model) or {}
  if model and config.model_type ~= "t5" then
    error(("train: span_corruption trains an encoder-decoder (T5: the encoder reads the corrupted row, the decoder "
      .. "writes what was dropped); %s is not one (masked_lm for BERT, RoBERTa and ALBERT)"):format(model:type()), 0)
  end
  local out = { density = spec.density or 0.15, mean_span = spec.mean_span or 3, sentinel = spec.sentinel,
    eos = spec.eos or config.eos_token_id }
  if type(out.density) ~= "number" or not (out.density > 0 and out.density < 1) then
    error(("train: span_corruption.density must be a number between 0 and 1 (exclusive), got %s")
      :format(tostring(out.density)), 0)
  end
  if type(out.mean_span) ~= "number" or out.mean_span < 1 then
    error(("train: span_corruption.mean_span must be a number >= 1, got %s"):format(tostring(out.mean_span)), 0)
  end
  local vocab = config.vocab_size
  for _, name in ipairs({ "sentinel", "eos" }) do
    local id = out[name]
    if not integer(id) or id < 0 or (vocab and id >= vocab) then
      error(("train: span_corruption.%s must be a token id, an integer from 0 to %s, got %s%s"):format(name,
        vocab and tostring(vocab - 1) or "the vocabulary's last", tostring(id),
        name == "sentinel" and " (<extra_id_0>'s id: 32099 in T5's own vocabulary)" or ""), 0)
    end
  end
  return out
end

local function round(x)
  return math.floor(x + 0.5)
end

--- For rows of `seq` tokens: tokens dropped, spans, the encoder's and the decoder's lengths.
function M.lengths(seq, spec)
  local noise = math.min(math.max(round(seq * spec.density), 1), seq - 1)
  local spans = math.max(round(noise / spec.mean_span), 1)
  return noise, spans, seq - noise + spans + 1, noise + spans + 1
end

-- `items` split into `segments` non-empty runs at random: each run's length.
local function segment(items, segments)
  local order, draws = {}, slapo.rand({ items - 1 }):tolist()
  for i = 1, items - 1 do order[i] = i end
  table.sort(order, function(a, b) return draws[a] < draws[b] end)
  local cut = {}
  for i = 1, segments - 1 do cut[order[i]] = true end
  local lengths, length = {}, 1
  for i = 1, items - 1 do
    if cut[i] then
      lengths[#lengths + 1], length = length, 1
    else
      length = length + 1
    end
  end
  lengths[#lengths + 1] = length
  return lengths
end

--- inputs [batch, encoder length], labels [batch, decoder length] for token ids [batch, seq].
function M.corrupt(ids, spec)
  local flat, shape = ids:tolist(), ids:size()  -- tolist is row-major and flat
  local batch, seq = shape[1], shape[2]
  local noise, spans = M.lengths(seq, spec)
  if seq < 2 then
    error(("train: span_corruption needs rows of 2 tokens or more, got %d"):format(seq), 0)
  end
  if spans > spec.sentinel + 1 then
    error(("train: span_corruption drops %d spans from a row of %d tokens, and sentinel %d leaves ids for %d")
      :format(spans, seq, spec.sentinel, spec.sentinel + 1), 0)
  end
  local inputs, labels = {}, {}
  for r = 1, batch do
    local dropped, kept = segment(noise, spans), segment(seq - noise, spans)
    local input, label, at, row = {}, {}, 1, (r - 1) * seq
    local function take()
      at = at + 1
      return flat[row + at - 1]
    end
    for span = 1, spans do
      for _ = 1, kept[span] do
        input[#input + 1] = take()
      end
      local sentinel = spec.sentinel - (span - 1)
      input[#input + 1], label[#label + 1] = sentinel, sentinel
      for _ = 1, dropped[span] do
        label[#label + 1] = take()
      end
    end
    input[#input + 1], label[#label + 1] = spec.eos, spec.eos
    inputs[r], labels[r] = input, label
  end
  return slapo.tensor(inputs, { dtype = "int64" }), slapo.tensor(labels, { dtype = "int64" })
end

return M
