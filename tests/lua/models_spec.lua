-- The model zoo from Lua: presets, HF names, logits and loss, parameter counts.
describe("models", function()
  it("count parameters as Hugging Face does, from presets on the meta device", function()
    eq(124439808, slapo.models.gpt2("gpt2", { device = "meta" }):num_params())
    eq(109514298, slapo.models.bert("bert-base-uncased", { device = "meta" }):num_params())
    eq(1100048384, slapo.models.llama("TinyLlama-1.1B", { device = "meta" }):num_params())
  end)

  it("return logits, or the causal-LM loss given labels", function()
    slapo.manual_seed(0)
    local cfgs = {
      gpt2 = { n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 50, n_positions = 16 },
      bert = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64, vocab_size = 50 },
      llama = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
        intermediate_size = 64, vocab_size = 50 },
    }
    for kind, cfg in pairs(cfgs) do
      local model = slapo.models[kind](cfg):eval()
      local ids = slapo.randint(0, 50, { 2, 8 })
      eq({ 2, 8, 50 }, model(ids):size(), kind)
      local loss = model(ids, { labels = ids })
      eq(0, loss:dim(), kind)
      -- a fresh model predicts about uniformly: loss near log(50) = 3.9
      assert(math.abs(loss:item() - math.log(50)) < 0.5, kind .. " loss " .. loss:item())
      loss:backward()
    end
  end)

  it("use causal attention in GPT-2: a later token does not change earlier logits", function()
    slapo.manual_seed(3)
    local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 20, n_positions = 8 }):eval()
    local ids = slapo.tensor({ { 1, 2, 3, 4 } }):long()
    local changed = slapo.tensor({ { 1, 2, 3, 9 } }):long()
    close(model(ids):narrow(1, 0, 3), model(changed):narrow(1, 0, 3))
    assert(not slapo.allclose(model(ids):narrow(1, 3, 1), model(changed):narrow(1, 3, 1)))
  end)

  it("name unknown presets and model fields clearly", function()
    matches("unknown preset 'gpt3'.*presets: bert%-base%-uncased", pcall_err(function() slapo.models.gpt2("gpt3") end))
    matches("preset 'gpt2' is a gpt2 model, not llama", pcall_err(function() slapo.models.llama("gpt2") end))
    matches("n_embd 30 is not a multiple of n_head 4", pcall_err(function()
      slapo.models.gpt2({ n_embd = 30, n_head = 4, n_layer = 1 })
    end))
  end)

  it("keep the config a model was built from", function()
    local cfg = slapo.models.config(slapo.models.llama("TinyLlama-1.1B", { device = "meta" }))
    eq("llama", cfg.model_type)
    eq(4, cfg.num_key_value_heads)
    eq(5632, cfg.intermediate_size)
  end)
end)
