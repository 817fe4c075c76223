-- slapo.op replacements on the fused kernels verify against the modules they replace.
describe("slapo.op", function()
  it("FusedLlamaMLP and FusedRMSNorm keep LLaMA's outputs and gradients", function()
    slapo.manual_seed(6)
    local model = slapo.models.llama({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
      num_key_value_heads = 2, intermediate_size = 64, vocab_size = 50, rms_norm_eps = 1e-6 })
    local sch = slapo.create_schedule(model)
    local report = slapo.verify(sch, { slapo.randint(0, 50, { 2, 7 }) }, {}, function(s)
      for _, layer in ipairs(s["model.layers"]:children()) do
        layer["mlp"]:replace(slapo.op.FusedLlamaMLP(layer["mlp"].mod))
        layer["input_layernorm"]:replace(slapo.op.FusedRMSNorm(layer["input_layernorm"].mod, 1e-6))
      end
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
    eq("FusedLlamaMLP", sch["model.layers.1.mlp"].mod:type())
  end)

  it("FusedGPT2MLP keeps GPT-2's outputs and gradients, with the model's own GELU (tanh or exact)", function()
    for _, act in ipairs({ "gelu_new", "gelu" }) do
      slapo.manual_seed(7)
      local model = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 50, n_positions = 16,
        activation_function = act })
      local sch = slapo.create_schedule(model)
      slapo.verify(sch, { slapo.randint(0, 50, { 2, 7 }) }, { rtol = 1e-6, atol = 1e-6 }, function(s)
        for _, block in ipairs(s["transformer.h"]:children()) do
          block["mlp"]:replace(slapo.op.FusedGPT2MLP(block["mlp"].mod))
        end
      end)
    end
    local relu = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 4, vocab_size = 50, n_positions = 16,
      activation_function = "relu" })
    matches("op.FusedGPT2MLP: the MLP's activation is ReLU", pcall_err(slapo.op.FusedGPT2MLP, relu.transformer.h["0"].mlp))
  end)

  it("FusedQKVAttention keeps BERT's outputs and gradients, with a padding mask", function()
    slapo.manual_seed(9)
    local model = slapo.models.bert({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
      intermediate_size = 64, vocab_size = 50, max_position_embeddings = 16 })
    local sch = slapo.create_schedule(model)
    local ids = slapo.randint(0, 50, { 2, 9 })
    local mask = slapo.cat({ slapo.ones({ 2, 6 }), slapo.zeros({ 2, 3 }) }, 1)  -- the last 3 tokens are padding
    local report = slapo.verify(sch, { ids, { attention_mask = mask } }, {}, function(s)
      for _, layer in ipairs(s["bert.encoder.layer"]:children()) do
        layer["attention.self"]:replace(slapo.op.FusedQKVAttention(layer["attention.self"].mod))
      end
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
    eq("FusedQKVAttention", sch["bert.encoder.layer.1.attention.self"].mod:type())
  end)

  it("FusedBertOutput keeps BERT's outputs and gradients, with dropout on (same masks)", function()
    slapo.manual_seed(10)
    local model = slapo.models.bert({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
      intermediate_size = 64, vocab_size = 50, max_position_embeddings = 16, hidden_dropout_prob = 0.2 })
    local sch = slapo.create_schedule(model)
    local report = slapo.verify(sch, { slapo.randint(0, 50, { 2, 9 }) }, { train = true }, function(s)
      for _, layer in ipairs(s["bert.encoder.layer"]:children()) do
        for _, path in ipairs({ "attention.output", "output" }) do
          layer[path]:replace(slapo.op.FusedBertOutput(layer[path].mod))
        end
      end
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
    eq("FusedBertOutput", sch["bert.encoder.layer.1.output"].mod:type())
    eq("FusedBertSelfOutput", sch["bert.encoder.layer.1.attention.output"].mod:type())
  end)

  it("FusedGPT2Attention keeps GPT-2's outputs and gradients (eval, no attention dropout)", function()
    slapo.manual_seed(8)
    local model = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 50, n_positions = 16 })
    local sch = slapo.create_schedule(model)
    slapo.verify(sch, { slapo.randint(0, 50, { 2, 9 }) }, {}, function(s)
      for _, block in ipairs(s["transformer.h"]:children()) do
        block["attn"]:replace(slapo.op.FusedGPT2Attention(block["attn"].mod))
      end
    end)
    eq("FusedGPT2Attention", sch["transformer.h.0.attn"].mod:type())
  end)

  it("FusedGPT2Attention honours a padding mask", function()
    slapo.manual_seed(8)
    local model = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 50, n_positions = 16 })
    local ids = slapo.randint(0, 50, { 2, 9 })
    local mask = slapo.cat({ slapo.ones({ 2, 6 }), slapo.zeros({ 2, 3 }) }, 1)
    local sch = slapo.create_schedule(model)
    local report = slapo.verify(sch, { ids, { attention_mask = mask } }, {}, function(s)
      for _, block in ipairs(s["transformer.h"]:children()) do
        block["attn"]:replace(slapo.op.FusedGPT2Attention(block["attn"].mod))
      end
    end)
    eq("FusedGPT2Attention", sch["transformer.h.1.attn"].mod:type())
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)

  it("the zoo's GPT2Attention and LlamaAttention are causal when called on their own", function()
    slapo.manual_seed(10)
    local gpt2 = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 4, vocab_size = 50, n_positions = 16 }):eval()
    local llama = slapo.models.llama({ hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 4,
      intermediate_size = 64, vocab_size = 50 }):eval()
    local x = slapo.randn({ 1, 6, 32 })
    local attn = gpt2.transformer.h["0"].attn
    -- the first 3 positions' outputs do not depend on the later positions
    local changed = slapo.cat({ x:narrow(1, 0, 3), slapo.randn({ 1, 3, 32 }) }, 1)
    close(attn(x):narrow(1, 0, 3), attn(changed):narrow(1, 0, 3))
    local ids = slapo.randint(0, 50, { 1, 6 })
    local other = slapo.cat({ ids:narrow(1, 0, 3), slapo.randint(0, 50, { 1, 3 }) }, 1)
    close(llama(ids):narrow(1, 0, 3), llama(other):narrow(1, 0, 3))
  end)

  it("refuses the wrong module", function()
    matches("op.FusedLlamaMLP: expected a LlamaMLP or Qwen2MLP or MistralMLP to replace, got Linear", pcall_err(function()
      slapo.op.FusedLlamaMLP(slapo.nn.Linear(2, 2))
    end))
  end)
end)
