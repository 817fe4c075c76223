-- Checkpoints written by transformers' own save_pretrained (../shared/fixtures/hf, beside the
-- checkout), with the logits transformers computed: from_pretrained must build the same model.
local fixtures = os.getenv("SLAPO_HF_FIXTURES") or "../shared/fixtures/hf"

local function check_logits(name)
  local dir = fixtures .. "/" .. name
  assert(io.open(dir .. "/config.json"), "no fixture at " .. dir .. " (set SLAPO_HF_FIXTURES)")
  local model = slapo.models.from_pretrained(dir):eval()
  local expected = slapo.load_tensors(dir .. "/expected.safetensors")
  local logits = model(expected.input_ids)
  local rel = ((logits - expected.logits):abs():max() / expected.logits:abs():max()):item()
  assert(rel < 1e-5, ("%s: logits differ from transformers' by %.3g relative"):format(name, rel))
end

-- The loss and every parameter's gradient (named as transformers names them) against transformers'.
local function check_gradients(name)
  local dir = fixtures .. "/" .. name
  local model = slapo.models.from_pretrained(dir):eval()
  local expected = slapo.load_tensors(dir .. "/expected.safetensors")
  local loss = model(expected.input_ids, { labels = expected.input_ids })
  assert(math.abs(loss:item() - expected.loss:item()) < 1e-5 * expected.loss:item(), name .. ": loss differs")
  loss:backward()
  local checked = 0
  for pname, p in model:named_parameters() do
    local want = expected["grad." .. pname]
    assert(want, name .. ": transformers has no gradient for " .. pname)
    local rel = ((p.grad - want):abs():max() / (want:abs():max() + 1e-12)):item()
    assert(rel < 1e-4, ("%s: %s's gradient differs by %.3g relative"):format(name, pname, rel))
    checked = checked + 1
  end
  assert(checked >= 20, name .. ": checked only " .. checked .. " gradients")
  return model
end

describe("RoPE from transformers' configs", function()
  it("reads 5.x rope_parameters (rope_theta 500000 inside it)", function()
    check_logits("llama-tiny")
    check_gradients("llama-tiny")
  end)

  it("computes llama3 scaling (factor, low/high_freq_factor, original_max_position_embeddings) as transformers", function()
    check_logits("llama3-rope-scaling")
    check_gradients("llama3-rope-scaling")
  end)

  local base = { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 64,
    vocab_size = 50, max_position_embeddings = 64 }
  local function with(extra)
    local c = {}
    for k, v in pairs(base) do c[k] = v end
    for k, v in pairs(extra) do c[k] = v end
    return c
  end

  it("linear scaling divides every frequency by factor: position 2p scaled is position p unscaled", function()
    local plain = slapo.models.llama(base).model.rotary_emb
    local linear = slapo.models.llama(with({ rope_scaling = { rope_type = "linear", factor = 2.0 } })).model.rotary_emb
    local x = slapo.randn({ 1, 4, 32 })
    local cos_plain = plain(x, slapo.tensor({ { 0, 1, 2, 3 } }, { dtype = "int64" }))[1]
    local cos_linear = linear(x, slapo.tensor({ { 0, 2, 4, 6 } }, { dtype = "int64" }))[1]
    close(cos_plain, cos_linear)
  end)

  it("refuses a rope type it does not implement, naming it, instead of running the default", function()
    matches("rope_scaling.rope_type 'yarn' is not supported %(supported: default, linear, dynamic, llama3%)",
      pcall_err(slapo.models.llama, with({ rope_scaling = { rope_type = "yarn", factor = 4.0 } })))
    matches("rope_parameters.factor must be a number >= 1",
      pcall_err(slapo.models.llama, with({ rope_parameters = { rope_type = "linear" } })))
  end)
end)

describe("Qwen2 (model_type qwen2)", function()
  it("builds Qwen2ForCausalLM (q/k/v biases, tied head) with transformers' logits, loss and gradients", function()
    check_logits("qwen2-tiny")
    local model = check_gradients("qwen2-tiny")
    eq("Qwen2ForCausalLM", model:type())
    eq("Qwen2Attention", model.model.layers["0"].self_attn:type())
  end)

  it("refuses sliding-window attention rather than computing full attention", function()
    matches("qwen2: use_sliding_window = true is not supported",
      pcall_err(slapo.models.build, { model_type = "qwen2", hidden_size = 32, num_hidden_layers = 1,
        num_attention_heads = 2, num_key_value_heads = 2, intermediate_size = 64, vocab_size = 50,
        use_sliding_window = true, sliding_window = 8 }))
  end)
end)

describe("GPT-2 from transformers' checkpoints", function()
  it("gpt2-tiny: logits (also with padding), loss and every gradient", function()
    check_logits("gpt2-tiny")
    local dir = fixtures .. "/gpt2-tiny"
    local model = slapo.models.from_pretrained(dir):eval()
    local expected = slapo.load_tensors(dir .. "/expected.safetensors")
    local masked = model(expected.input_ids, { attention_mask = expected.attention_mask })
    close(expected.logits_masked, masked, { rtol = 1e-5, atol = 1e-5 })
    check_gradients("gpt2-tiny")
  end)

  it("gpt2-variants: exact GELU, n_inner, scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn", function()
    check_logits("gpt2-variants")
    check_gradients("gpt2-variants")
  end)
end)
