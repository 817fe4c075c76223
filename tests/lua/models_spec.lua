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

  it("run a layer on the meta device, shapes only (the planner traces layers that way)", function()
    local cases = {
      { "gpt2", { n_embd = 32, n_layer = 1, n_head = 4, vocab_size = 50 }, "transformer.h.0", {} },
      { "bert", { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 4, intermediate_size = 64,
        vocab_size = 50 }, "bert.encoder.layer.0", {} },
      -- grouped key/value heads: two query heads share each
      { "llama", { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 4, num_key_value_heads = 2,
        intermediate_size = 64, vocab_size = 50 }, "model.layers.0",
        { slapo.zeros({ 1, 5, 8 }, { device = "meta" }), slapo.zeros({ 1, 5, 8 }, { device = "meta" }) } },
    }
    for _, c in ipairs(cases) do
      local layer = slapo.models[c[1]](c[2], { device = "meta" })
      for part in c[3]:gmatch("[^.]+") do layer = layer[part] end
      local out = layer(slapo.randn({ 1, 5, 32 }, { device = "meta" }), unpack(c[4]))
      eq({ 1, 5, 32 }, out:size(), c[1])
      eq("meta", out:device(), c[1])
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

describe("models built from the meta device", function()
  -- slapo.build initialises a model made without memory with its family's own rule, in the order
  -- its builder draws (GPT-2's second pass over c_proj included), so the values are those a direct
  -- build gets from the same seed (build's default seed is 0).
  it("get the values their direct build gets from the same seed, each family by its own rule", function()
    local cases = {
      { "t5", { d_model = 16, d_kv = 4, d_ff = 32, num_layers = 2, num_heads = 4, vocab_size = 40,
        initializer_factor = 0.5 } },
      { "t5", { d_model = 16, d_kv = 4, d_ff = 32, num_layers = 1, num_decoder_layers = 2, num_heads = 4,
        vocab_size = 40, feed_forward_proj = "gated-gelu", tie_word_embeddings = false } },
      { "opt", { hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 2, ffn_dim = 32, vocab_size = 40,
        max_position_embeddings = 16, init_std = 0.5 } },
      { "bert", { hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 2, intermediate_size = 32,
        vocab_size = 40, max_position_embeddings = 16 } },
      { "gpt2", { n_embd = 16, n_layer = 3, n_head = 2, vocab_size = 40, n_positions = 16 } },
      { "llama", { hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 2, intermediate_size = 32,
        vocab_size = 40 } },
    }
    for _, case in ipairs(cases) do
      local family, cfg = case[1], case[2]
      slapo.manual_seed(0)
      local direct = slapo.models[family](cfg)
      local built = slapo.build(slapo.create_schedule(slapo.models[family](cfg, { device = "meta" })))
      local theirs = {}
      for name, p in built:named_parameters() do theirs[name] = p end
      local compared = 0
      for name, p in direct:named_parameters() do
        assert(theirs[name] and p:equal(theirs[name]), family .. ": " .. name .. " differs")
        compared = compared + 1
      end
      assert(compared > 10, family .. ": compared " .. compared)
    end
  end)
end)

describe("slapo.models.resnet", function()
  it("has torchvision's parameter counts, and trains a step", function()
    eq(11689512, slapo.models.resnet("resnet18", { device = "meta" }):num_params())
    eq(25557032, slapo.models.resnet("resnet50", { device = "meta" }):num_params())
    eq(68883240, slapo.models.resnet("wide_resnet50_2", { device = "meta" }):num_params())
    slapo.manual_seed(3)
    local model = slapo.models.resnet({ block = "basic", layers = { 1, 1, 1, 1 }, num_classes = 10 })
    local x, y = slapo.randn({ 4, 3, 32, 32 }), slapo.randint(0, 10, { 4 })
    local opt = slapo.optim.sgd(model, { lr = 0.1 })
    local first
    for step = 1, 3 do
      opt:zero_grad()
      local loss = slapo.F.cross_entropy(model(x), y)
      loss:backward()
      opt:step()
      first = first or loss:item()
      if step == 3 then
        assert(loss:item() < first, "the loss fell")
      end
    end
    eq(1, model.bn1.num_batches_tracked:item() > 0 and 1 or 0)
    matches("models.resnet: unknown preset 'resnet9'", pcall_err(slapo.models.resnet, "resnet9"))
    matches("models.resnet: unknown option 'layer'", pcall_err(slapo.models.resnet, { layer = { 1, 1, 1, 1 } }))
    matches("Conv2d: expected a %[N, C, H, W%]", pcall_err(model, slapo.randn({ 4, 3 })))
    matches("nn.Conv2d: in_channels 3 and out_channels 8 must both be divisible by groups 2",
      pcall_err(slapo.nn.Conv2d, 3, 8, 3, { groups = 2 }))
  end)
end)
