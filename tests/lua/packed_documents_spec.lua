-- Packed documents kept apart (issue 32): a LLaMA-family model given position_ids that start again
-- at 0 where a document starts attends only inside each document, so a row holding two documents
-- gives each one's logits as if it ran alone; with the documents' first tokens left out of the
-- labels, the loss is the documents' own losses, weighted by their targets.
local function llama(family, extra)
  slapo.manual_seed(21)
  local cfg = { hidden_size = 32, intermediate_size = 64, num_hidden_layers = 2, num_attention_heads = 4,
    num_key_value_heads = 2, vocab_size = 97, max_position_embeddings = 64 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  return slapo.models[family or "llama"](cfg)
end

-- Two random documents of `la` and `lb` tokens, packed in one row, and the row's position_ids.
local function two_documents(seed, la, lb)
  slapo.manual_seed(seed)
  local a, b = slapo.randint(0, 97, { 1, la }), slapo.randint(0, 97, { 1, lb })
  local p = {}
  for i = 1, la do p[#p + 1] = i - 1 end
  for i = 1, lb do p[#p + 1] = i - 1 end
  return a, b, slapo.cat({ a, b }, 1), slapo.tensor({ p }):long()
end

describe("packed documents", function()
  for _, case in ipairs({ { family = "llama" }, { family = "mistral", cfg = { sliding_window = 4 } } }) do
    local title = case.family .. (case.cfg and " (sliding window 4)" or "") .. ": each document's logits as if it ran alone"
    it(title, function()
      local model = llama(case.family, case.cfg)
      model:eval()
      local a, b, packed, positions = two_documents(22, 7, 9)
      local together = model(packed, { position_ids = positions })
      close(model(a), together:narrow(1, 0, 7), { rtol = 1e-5, atol = 1e-5 })
      close(model(b), together:narrow(1, 7, 9), { rtol = 1e-5, atol = 1e-5 })
      -- without position_ids the second document sees the first: other logits
      assert(not slapo.allclose(model(b), model(packed):narrow(1, 7, 9), { rtol = 1e-3, atol = 1e-3 }))
    end)
  end

  it("the loss with each document's first token left out is the documents' own, by their targets", function()
    local model = llama()
    model:eval()
    local a, b, packed, positions = two_documents(23, 6, 10)
    local starts = positions:eq(0):long()
    local loss = model(packed, { labels = (packed - (packed + 100) * starts):long(), position_ids = positions })
    local expected = (model(a, { labels = a }) * 5 + model(b, { labels = b }) * 9) / 14
    close(expected, loss, { rtol = 1e-5, atol = 1e-6 })
  end)

  it("refuses position_ids of another shape or dtype, naming both", function()
    local model = llama()
    local ids = slapo.randint(0, 97, { 2, 5 })
    matches("LlamaModel: position_ids must be int64 of input_ids' shape %[2, 5%], got Long %[2, 4%]",
      pcall_err(model, ids, { position_ids = slapo.zeros({ 2, 4 }, { dtype = "int64" }) }))
    matches("position_ids must be int64 of input_ids' shape %[2, 5%], got Float %[2, 5%]",
      pcall_err(model, ids, { position_ids = slapo.zeros({ 2, 5 }) }))
  end)
end)
