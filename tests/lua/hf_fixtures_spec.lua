-- Checkpoints written by transformers' own save_pretrained (tests/fixtures/hf, see its README),
-- with the logits transformers computed: from_pretrained must build the same model.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local fixtures = os.getenv("SLAPO_HF_FIXTURES") or (here .. "/../fixtures/hf")

-- A copy of table `a` with the fields of `b` set over it.
local function merged(a, b)
  local c = {}
  for k, v in pairs(a) do c[k] = v end
  for k, v in pairs(b) do c[k] = v end
  return c
end

local function check_logits(name)
  local dir = fixtures .. "/" .. name
  assert(io.open(dir .. "/config.json"), "no fixture at " .. dir .. " (set SLAPO_HF_FIXTURES)")
  local model = slapo.models.from_pretrained(dir):eval()
  local expected = slapo.load_tensors(dir .. "/expected.safetensors")
  local logits = model(expected.input_ids)
  local rel = ((logits - expected.logits):abs():max() / expected.logits:abs():max()):item()
  assert(rel < 1e-5, ("%s: logits differ from transformers' by %.3g relative"):format(name, rel))
end

-- The loss and every parameter's gradient (named as transformers names them) against transformers':
-- each gradient of transformers' is compared, relative to its own largest entry, or to a thousandth
-- of the largest gradient of all where it is zero by symmetry (BERT's key bias).
local function check_gradients(name)
  local dir = fixtures .. "/" .. name
  local model = slapo.models.from_pretrained(dir):eval()
  local expected = slapo.load_tensors(dir .. "/expected.safetensors")
  local loss = model(expected.input_ids, { labels = expected.input_ids })
  assert(math.abs(loss:item() - expected.loss:item()) < 1e-5 * expected.loss:item(), name .. ": loss differs")
  loss:backward()
  local largest, wanted = 0, 0
  for key, t in pairs(expected) do
    if key:match("^grad%.") then
      largest, wanted = math.max(largest, t:abs():max():item()), wanted + 1
    end
  end
  local checked = 0
  for pname, p in model:named_parameters() do
    local want = expected["grad." .. pname]
    assert(want, name .. ": transformers has no gradient for " .. pname)
    local scale = math.max(want:abs():max():item(), 1e-3 * largest)
    local rel = (p.grad - want):abs():max():item() / scale
    assert(rel < 1e-4, ("%s: %s's gradient differs by %.3g relative"):format(name, pname, rel))
    checked = checked + 1
  end
  eq(wanted, checked, name .. ": gradients compared, of those transformers computed")
  return model
end

describe("from_pretrained on the meta device", function()
  it("keeps shapes only; slapo.build reads the checkpoint's values, in the checkpoint's dtype or a cast", function()
    for _, name in ipairs({ "bert-tiny", "gpt2-tiny", "gpt-neo-tiny", "opt-tiny", "llama-tiny", "qwen2-tiny",
      "mistral-tiny", "mixtral-tiny" }) do
      local dir = fixtures .. "/" .. name
      local eager = slapo.models.from_pretrained(dir):eval()
      local lazy = slapo.models.from_pretrained(dir, { device = "meta" })
      for _, p in ipairs(lazy:parameters()) do
        eq("meta", p:device(), name)
      end
      local built = slapo.build(slapo.create_schedule(lazy)):eval()
      local theirs = built:state_dict()
      for key, p in pairs(eager:state_dict()) do
        eq(true, p:equal(theirs[key]), name .. ": " .. key)
      end
      local expected = slapo.load_tensors(dir .. "/expected.safetensors")
      eq(true, eager(expected.input_ids):equal(built(expected.input_ids)), name .. ": logits")
    end
    local dir = fixtures .. "/gpt2-tiny"
    local cast = slapo.build(slapo.create_schedule(slapo.models.from_pretrained(dir, { device = "meta",
      dtype = "bfloat16" })))
    local eager = slapo.models.from_pretrained(dir, { dtype = "bfloat16" })
    eq("bfloat16", cast:parameters()[1]:dtype())
    eq(true, eager:parameters()[1]:equal(cast:parameters()[1]))
  end)
end)

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
    return merged(base, extra)
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

  local small = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 50 }
  local function qwen2(extra)
    return slapo.models.qwen2(merged(small, extra))
  end

  it("slides the window on the layers from max_window_layers on, or on those layer_types names", function()
    local m = qwen2({ use_sliding_window = true, sliding_window = 8, max_window_layers = 1 })
    eq(nil, m.model.layers["0"].self_attn:describe():match("sliding_window"))
    eq("head_dim=16, sliding_window=8", m.model.layers["1"].self_attn:describe())
    m = qwen2({ use_sliding_window = true, sliding_window = 8, layer_types = { "sliding_attention", "full_attention" } })
    eq("head_dim=16, sliding_window=8", m.model.layers["0"].self_attn:describe())
    eq("head_dim=16", m.model.layers["1"].self_attn:describe())
    eq("head_dim=16", qwen2({ sliding_window = 8, max_window_layers = 0 }).model.layers["1"].self_attn:describe())
  end)

  it("refuses layer types it does not implement and a sliding layer without a window", function()
    matches("qwen2 field 'layer_types' holds \"chunked_attention\"",
      pcall_err(qwen2, { layer_types = { "full_attention", "chunked_attention" } }))
    matches("qwen2 field 'layer_types' must list one type per layer %(2 layers%)",
      pcall_err(qwen2, { layer_types = { "full_attention" } }))
    matches("qwen2: layer 0 is a sliding_attention layer but use_sliding_window is false",
      pcall_err(qwen2, { layer_types = { "sliding_attention", "full_attention" } }))
  end)
end)

describe("Mistral (model_type mistral)", function()
  local cfg = { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 50, sliding_window = 4 }

  it("builds MistralForCausalLM with transformers' module names and no biases", function()
    local m = slapo.models.mistral(cfg)
    eq("MistralForCausalLM", m:type())
    eq("MistralAttention", m.model.layers["0"].self_attn:type())
    eq("MistralRMSNorm", m.model.norm:type())
    local names = {}
    for name in m:named_parameters() do names[#names + 1] = name end
    eq(nil, table.concat(names, " "):match("bias"))
    eq("head_dim=8, sliding_window=4", m.model.layers["0"].self_attn:describe())
  end)

  -- With one layer, position i sees tokens i-3..i; rotary scores depend on distances only, so its
  -- logits are those of the full-attention model at the last position of just those 4 tokens.
  it("attends within the sliding window as transformers does (the query and the window - 1 keys before it)", function()
    local windowed = slapo.models.mistral(cfg):eval()
    local full = slapo.models.mistral(merged(cfg, { sliding_window = 1000 })):eval()
    full:load_state_dict(windowed:state_dict())
    local ids = slapo.randint(0, 50, { 1, 10 })
    local logits = windowed(ids)
    for i = 4, 10 do
      local window = full(ids:narrow(1, i - 4, 4))
      close(window:narrow(1, 3, 1), logits:narrow(1, i - 1, 1), { rtol = 1e-5, atol = 1e-6 })
    end
    -- and it differs from full attention once the sequence is longer than the window
    local rel = ((full(ids) - logits):abs():max()):item()
    assert(rel > 1e-4, "the window changed nothing")
    -- with padding, the window applies on top of the padding mask; gradients flow
    local mask = slapo.ones({ 1, 10 }, { dtype = "int64" })
    close(logits, windowed(ids, { attention_mask = mask }), { rtol = 1e-5, atol = 1e-6 })
    windowed:train()
    windowed(ids, { labels = ids }):backward()
    assert(windowed.model.layers["0"].self_attn.q_proj.weight.grad:abs():sum():item() > 0)
  end)
end)

-- The same weights under a config written the way transformers 4.x wrote it: rope_theta and
-- rope_scaling at the top level, torch_dtype, no layer_types.
local function as_4x(name)
  local dir = fixtures .. "/" .. name
  local c = slapo.read_json(dir .. "/config.json")
  local rope = c.rope_parameters
  if rope then
    c.rope_parameters = nil
    c.rope_theta = rope.rope_theta
    rope.rope_theta = nil
    if rope.rope_type ~= "default" then
      c.rope_scaling = rope
    end
  end
  c.torch_dtype, c.dtype, c.layer_types = c.dtype, nil, nil
  local out = os.tmpname()
  os.remove(out)
  assert(os.execute(("mkdir -p '%s' && cp '%s/model.safetensors' '%s/'"):format(out, dir, out)))
  slapo.write_json(out .. "/config.json", c)
  return out
end

describe("config.json in both formats", function()
  for _, name in ipairs({ "llama-tiny", "llama3-rope-scaling", "qwen2-tiny", "gpt2-variants" }) do
    it(name .. ": the 4.x form of the config builds the same model", function()
      local dir = fixtures .. "/" .. name
      local expected = slapo.load_tensors(dir .. "/expected.safetensors")
      local old_dir = as_4x(name)
      eq(nil, slapo.read_json(old_dir .. "/config.json").rope_parameters)
      local a = slapo.models.from_pretrained(dir):eval()(expected.input_ids)
      local b = slapo.models.from_pretrained(old_dir):eval()(expected.input_ids)
      eq(0, (a - b):abs():max():item())
      close(expected.logits, b, { rtol = 1e-5, atol = 1e-5 })
    end)
  end

  it("refuses what the zoo does not compute and ranges that cannot be right, naming the field", function()
    matches("config: bert field 'position_embedding_type' = \"relative_key\" is not supported %(\"absolute\"%)",
      pcall_err(slapo.models.bert, { position_embedding_type = "relative_key", num_hidden_layers = 1 }))
    matches("config: gpt2 field 'add_cross_attention' = true is not supported",
      pcall_err(slapo.models.gpt2, { add_cross_attention = true, n_layer = 1 }))
    matches("config: gpt2 field 'n_head' must be an integer from 1 to 16777216, got 0",
      pcall_err(slapo.models.gpt2, { n_embd = 16, n_head = 0, n_layer = 1, vocab_size = 8 }))
    matches("config: llama field 'num_key_value_heads' must be null or an integer from 1 to 16777216, got 0",
      pcall_err(slapo.models.llama, { num_key_value_heads = 0, num_hidden_layers = 1 }))
    matches("config: gpt2 field 'n_layer' must be an integer from 1 to 4096, got 2147483648",
      pcall_err(slapo.models.gpt2, { n_layer = 2 ^ 31 }))
    matches("config: gpt2 field 'attn_pdrop' must be a number from 0 to 1, got 1.5",
      pcall_err(slapo.models.gpt2, { attn_pdrop = 1.5, n_layer = 1 }))
    matches("config: llama field 'rope_theta' must be a number > 0, got 0",
      pcall_err(slapo.models.llama, { rope_theta = 0, num_hidden_layers = 1 }))
    matches("config: llama field 'pad_token_id' = 99 must be null, negative %(no pad token%) or a token id from 0 to 49",
      pcall_err(slapo.models.llama, { pad_token_id = 99, vocab_size = 50, num_hidden_layers = 1,
        hidden_size = 16, num_attention_heads = 2, intermediate_size = 32 }))
    matches("config: llama field 'quantization_config' = .* is not supported",
      pcall_err(slapo.models.llama, { quantization_config = { quant_method = "gptq" }, num_hidden_layers = 1 }))
  end)
end)

describe("pad_token_id = -1 (configs of the LLaMA-1 era)", function()
  it("loads as no pad token, as transformers does: the same model as pad_token_id = null", function()
    local cfg = { vocab_size = 50, num_hidden_layers = 1, hidden_size = 16, num_attention_heads = 2,
      intermediate_size = 32 }
    slapo.manual_seed(4)
    local minus_one = slapo.models.llama(merged(cfg, { pad_token_id = -1 }))
    slapo.manual_seed(4)
    local none = slapo.models.llama(cfg)
    local ids = slapo.tensor({ { 49, 0, 3 } }, { dtype = "int64" })
    close(none(ids), minus_one(ids), { rtol = 0, atol = 0 })
    -- no padding row: the last token's embedding still learns (a padding_idx of -1 would freeze row 49)
    minus_one(ids, { labels = ids }):backward()
    assert(minus_one.model.embed_tokens.weight.grad:narrow(0, 49, 1):abs():sum():item() > 0, "row 49 got no gradient")
  end)
end)

describe("dtypes", function()
  it("a bfloat16 checkpoint loads in bfloat16 (or as asked) and writes the dtype both formats read", function()
    local model = slapo.models.from_pretrained(fixtures .. "/llama-tiny"):to("bfloat16")
    local dir = os.tmpname()
    os.remove(dir)
    slapo.save(model, dir)
    local c = slapo.read_json(dir .. "/config.json")
    eq("bfloat16", c.dtype)
    eq("bfloat16", c.torch_dtype)
    eq("bfloat16", slapo.models.from_pretrained(dir).lm_head.weight:dtype())
    eq("float32", slapo.models.from_pretrained(dir, { dtype = "float32" }).lm_head.weight:dtype())
    eq("float32", slapo.models.from_pretrained(fixtures .. "/llama-tiny").lm_head.weight:dtype())
  end)

  it("bfloat16 weights cast to float32 give float32 gradients: nothing stays in low precision", function()
    local dir = os.tmpname()
    os.remove(dir)
    slapo.save(slapo.models.from_pretrained(fixtures .. "/llama-tiny"):to("bfloat16"), dir)
    local cast = slapo.models.from_pretrained(dir):to("float32"):eval()
    -- the same rounded weights, never held in bfloat16 by a model
    local rounded = slapo.models.from_pretrained(fixtures .. "/llama-tiny"):eval()
    local state = {}
    for name, p in pairs(rounded:state_dict()) do state[name] = p:to("bfloat16"):to("float32") end
    rounded:load_state_dict(state)
    local ids = slapo.load_tensors(fixtures .. "/llama-tiny/expected.safetensors").input_ids
    cast(ids, { labels = ids }):backward()
    rounded(ids, { labels = ids }):backward()
    local grads = {}
    for name, p in rounded:named_parameters() do grads[name] = p.grad end
    for name, p in cast:named_parameters() do
      eq("float32", p.grad:dtype())
      close(grads[name], p.grad, { rtol = 1e-5, atol = 1e-7 })
    end
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

describe("BERT and Mistral from transformers' checkpoints", function()
  it("bert-tiny (BertLMHeadModel): logits with and without the attention mask, loss and every gradient", function()
    check_logits("bert-tiny")
    local dir = fixtures .. "/bert-tiny"
    local model = slapo.models.from_pretrained(dir):eval()
    local expected = slapo.load_tensors(dir .. "/expected.safetensors")
    assert(expected.attention_mask:sum():item() < expected.attention_mask:numel(), "the fixture pads a row")
    local masked = model(expected.input_ids, { attention_mask = expected.attention_mask })
    close(expected.logits_masked, masked, { rtol = 1e-5, atol = 1e-5 })
    check_gradients("bert-tiny")
  end)

  it("mistral-tiny: grouped keys and values, a sliding window of 8 active over 24 tokens", function()
    local expected = slapo.load_tensors(fixtures .. "/mistral-tiny/expected.safetensors")
    assert(expected.input_ids:size()[2] > 8, "the sequence is longer than the window")
    check_logits("mistral-tiny")
    local model = check_gradients("mistral-tiny")
    eq("MistralForCausalLM", model:type())
  end)
end)

-- Slapo's evaluated families (their fixtures' provenance.md lists the quirks each one checks).
describe("GPT-Neo and OPT from transformers' checkpoints", function()
  local function check_masked(name)
    local dir = fixtures .. "/" .. name
    local model = slapo.models.from_pretrained(dir):eval()
    local expected = slapo.load_tensors(dir .. "/expected.safetensors")
    assert(expected.attention_mask:sum():item() < expected.attention_mask:numel(), "the fixture pads a row")
    close(expected.logits_masked, model(expected.input_ids, { attention_mask = expected.attention_mask }),
      { rtol = 1e-5, atol = 1e-5 })
    return model
  end

  it("gpt-neo-tiny: unscaled attention, a local layer (window 4 over 16 tokens), padding, loss, every gradient", function()
    check_logits("gpt-neo-tiny")
    local model = check_masked("gpt-neo-tiny")
    eq("GPTNeoForCausalLM", model:type())
    eq("GPTNeoSelfAttention", model.transformer.h["1"].attn.attention:type())
    eq("global, head_dim=16", model.transformer.h["0"].attn.attention:describe())
    eq("local, head_dim=16", model.transformer.h["1"].attn.attention:describe())
    check_gradients("gpt-neo-tiny")
  end)

  it("opt-tiny: positions from the attention mask (offset 2), padding, loss, every gradient", function()
    check_logits("opt-tiny")
    local model = check_masked("opt-tiny")
    eq("OPTForCausalLM", model:type())
    check_gradients("opt-tiny")
  end)

  it("opt's post-norm layers with project_in / project_out (opt-350m's shape) train and save round trip", function()
    slapo.manual_seed(3)
    local cfg = { hidden_size = 32, ffn_dim = 64, num_hidden_layers = 2, num_attention_heads = 4, vocab_size = 100,
      max_position_embeddings = 32, word_embed_proj_dim = 16, do_layer_norm_before = false, dropout = 0.0 }
    local model = slapo.models.opt(cfg)
    eq(16, model.model.decoder.project_in.weight:size(1))
    matches("no method, child or parameter 'final_layer_norm'", pcall_err(function()
      return model.model.decoder.final_layer_norm
    end))
    local ids = slapo.randint(0, 100, { 2, 12 })
    local loss = model(ids, { labels = ids })
    loss:backward()
    assert(model.model.decoder.project_in.weight.grad:abs():sum():item() > 0, "project_in learns")
    local dir = os.tmpname()
    os.remove(dir)
    slapo.save(model, dir)
    local again = slapo.models.from_pretrained(dir)
    eq(0, (again(ids) - model(ids)):abs():max():item())
  end)

  it("presets have the parameter counts of the checkpoints transformers loads", function()
    local counts = { ["gpt-neo-125M"] = 125198592, ["opt-125m"] = 125239296, ["opt-350m"] = 331196416 }
    for name, want in pairs(counts) do
      eq(want, slapo.models.build(name, { device = "meta" }):num_params(), name)
    end
    eq("local", slapo.models.config(slapo.models.gpt_neo("gpt-neo-1.3B", { device = "meta" })).attention_types[1][1][2])
  end)

  it("refuses fields the zoo does not compute, naming the model, the field and what is supported", function()
    matches("config: gpt_neo field 'attention_types' lists 24 layers but num_layers is 2",
      pcall_err(slapo.models.gpt_neo, { num_layers = 2 }))
    matches("config: gpt_neo field 'attention_types' names an attention other than \"global\" and \"local\"",
      pcall_err(slapo.models.gpt_neo, { num_layers = 1, attention_types = { { { "sparse" }, 1 } } }))
    matches("config: gpt_neo field 'window_size' must be an integer from 1 to 16777216, got 0",
      pcall_err(slapo.models.gpt_neo, { window_size = 0 }))
    matches("config: opt field 'layerdrop' = 0.1 is not supported %(0: every layer runs",
      pcall_err(slapo.models.opt, { layerdrop = 0.1, num_hidden_layers = 1 }))
    matches("config: opt field 'layer_norm_elementwise_affine' = false is not supported %(true",
      pcall_err(slapo.models.opt, { layer_norm_elementwise_affine = false, num_hidden_layers = 1 }))
    matches("config: opt field 'ffn_dim' must be an integer from 1 to 16777216, got %-1",
      pcall_err(slapo.models.opt, { ffn_dim = -1, num_hidden_layers = 1 }))
  end)
end)

describe("masked LMs: RoBERTa and ALBERT from transformers' checkpoints, BertForMaskedLM", function()
  -- a masked LM's fixture: logits with the padded row's mask, transformers' MLM loss (labels: the ids,
  -- -100 on padding) and every gradient
  local function check_masked_lm(name, class)
    local dir = fixtures .. "/" .. name
    local model = slapo.models.from_pretrained(dir):eval()
    eq(class, model:type())
    local expected = slapo.load_tensors(dir .. "/expected.safetensors")
    local mask = expected.attention_mask
    assert(mask:sum():item() < mask:numel(), "the fixture pads a row")
    close(expected.logits, model(expected.input_ids, { attention_mask = mask }), { rtol = 1e-5, atol = 1e-5 })
    local labels = (expected.input_ids * mask + (mask - 1) * 100):long()
    local loss = model(expected.input_ids, { attention_mask = mask, labels = labels })
    assert(math.abs(loss:item() - expected.loss:item()) < 1e-5 * expected.loss:item(),
      ("%s: loss %.7f, transformers' %.7f"):format(name, loss:item(), expected.loss:item()))
    loss:backward()
    local largest = 0
    for key, t in pairs(expected) do
      if key:match("^grad%.") then largest = math.max(largest, t:abs():max():item()) end
    end
    local checked = 0
    for pname, p in model:named_parameters() do
      local want = assert(expected["grad." .. pname], "transformers has no gradient for " .. pname)
      local rel = (p.grad - want):abs():max():item() / math.max(want:abs():max():item(), 1e-3 * largest)
      assert(rel < 1e-4, ("%s: %s's gradient differs by %.3g relative"):format(name, pname, rel))
      checked = checked + 1
    end
    eq(#model:parameters(), checked)
    return model
  end

  it("roberta-tiny: positions after padding_idx, padded row, the MLM loss and every gradient", function()
    local model = check_masked_lm("roberta-tiny", "RobertaForMaskedLM")
    eq("RobertaSelfAttention", model.roberta.encoder.layer["0"].attention.self:type())
  end)

  it("albert-tiny: a 32-wide factorised embedding, one layer shared by 3, the MLM loss and every gradient", function()
    local model = check_masked_lm("albert-tiny", "AlbertForMaskedLM")
    eq("3 layers over 1 shared group(s)", model.albert.encoder:describe())
    -- the planner lays the shared layers out as one stage, never cut into pipeline stages
    local plan = slapo.plan(fixtures .. "/albert-tiny", { cluster = "1x2:cpu", batch = 4, seq = 16 })
    eq(1, plan.pp)
    matches("one stage: ALBERT's layers share their parameters", plan.summary)
    eq(32, model.albert.embeddings.word_embeddings.weight:size(1))
  end)

  it("albert: layers shared in groups as transformers assigns them (6 layers, 2 groups of 2 layers)", function()
    slapo.manual_seed(3)
    local model = slapo.models.albert({ embedding_size = 16, hidden_size = 32, num_hidden_layers = 6,
      num_hidden_groups = 2, inner_group_num = 2, num_attention_heads = 4, intermediate_size = 64,
      vocab_size = 50, max_position_embeddings = 16 })
    -- transformers: layer i runs group int(i / (6 / 2)): 0, 0, 0, 1, 1, 1, each its 2 inner layers
    local ids = slapo.randint(0, 50, { 1, 8 })
    local encoder = model.albert.encoder
    local h = encoder.embedding_hidden_mapping_in(model.albert.embeddings(ids))
    for _, g in ipairs({ "0", "0", "0", "1", "1", "1" }) do
      h = encoder.albert_layer_groups[g](h)
    end
    close(model.predictions(h), model(ids), { rtol = 1e-6, atol = 1e-6 })
    matches("config: albert field 'num_hidden_groups' = 7 is more than num_hidden_layers = 6",
      pcall_err(slapo.models.albert, { num_hidden_layers = 6, num_hidden_groups = 7 }))
  end)

  it("BertForMaskedLM (architectures) takes the loss where each position predicts its own label", function()
    slapo.manual_seed(2)
    local cfg = { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 64,
      vocab_size = 50, max_position_embeddings = 16, architectures = { "BertForMaskedLM" } }
    local model = slapo.models.bert(cfg):eval()
    eq("BertForMaskedLM", model:type())
    local ids = slapo.randint(0, 50, { 2, 8 })
    local labels = slapo.cat({ (slapo.zeros({ 2, 3 }) - 100):long(), ids:narrow(1, 3, 5) }, 1)
    local logits = model(ids)
    local keep = labels:narrow(1, 3, 5)
    local want = slapo.F.cross_entropy(logits:narrow(1, 3, 5):reshape({ -1, 50 }), keep:reshape({ -1 }))
    close(want, model(ids, { labels = labels }), { rtol = 1e-6, atol = 1e-7 })
    eq("BertLMHeadModel", slapo.models.bert({ num_hidden_layers = 1 }):type(), "the default stays the causal head")
  end)

  it("refuses a label outside the vocabulary, a sequence past the positions, RoBERTa as a decoder, naming them", function()
    slapo.manual_seed(2)
    local cfg = { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 64,
      vocab_size = 50, max_position_embeddings = 10 }
    local model = slapo.models.roberta(cfg)
    local ids = slapo.randint(3, 50, { 1, 8 })
    local labels = slapo.cat({ ids:narrow(1, 0, 2), (slapo.ones({ 1, 1 }) * 77):long(), ids:narrow(1, 3, 5) }, 1)
    matches("RobertaForMaskedLM: labels hold 77, outside the vocabulary: a label is a token id from 0 to 49 "
      .. "%(vocab_size 50%), or %-100", pcall_err(model, ids, { labels = labels }))
    matches("RobertaEmbeddings: a sequence of 9 tokens needs positions up to 10 %(they start after padding_idx 1%), "
      .. "but max_position_embeddings is 10; at most 8 tokens", pcall_err(model, slapo.randint(3, 50, { 1, 9 })))
    matches("config: roberta field 'is_decoder' = true is not supported %(false: RobertaForMaskedLM",
      pcall_err(slapo.models.roberta, { is_decoder = true, num_hidden_layers = 1 }))
  end)
end)

describe("T5 from transformers' checkpoint", function()
  it("t5-tiny: relative position buckets, gated GELU, untied head, padded encoder, loss and every gradient", function()
    local dir = fixtures .. "/t5-tiny"
    local model = slapo.models.from_pretrained(dir):eval()
    eq("T5ForConditionalGeneration", model:type())
    local e = slapo.load_tensors(dir .. "/expected.safetensors")
    local mask = e.attention_mask
    assert(mask:sum():item() < mask:numel(), "the fixture pads a row")
    close(e.encoder_last_hidden_state, model.encoder(e.input_ids, mask), { rtol = 1e-5, atol = 1e-5 })
    local logits = model(e.input_ids, { attention_mask = mask, decoder_input_ids = e.decoder_input_ids })
    close(e.logits, logits, { rtol = 1e-5, atol = 1e-4 })
    -- labels alone: the decoder's inputs are the labels shifted right after decoder_start_token_id
    local loss = model(e.input_ids, { attention_mask = mask, labels = e.labels })
    assert(math.abs(loss:item() - e.loss:item()) < 1e-5 * e.loss:item(),
      ("loss %.7f, transformers' %.7f"):format(loss:item(), e.loss:item()))
    loss:backward()
    local checked = 0
    for name, p in model:named_parameters() do
      local want = assert(e["grad." .. name], "transformers has no gradient for " .. name)
      local rel = (p.grad - want):abs():max():item() / want:abs():max():item()
      assert(rel < 1e-4, ("%s's gradient differs by %.3g relative"):format(name, rel))
      checked = checked + 1
    end
    eq(#model:parameters(), checked)
  end)

  it("a tied head scales the decoder's output by d_model^-0.5; t5-small has transformers' parameter count", function()
    slapo.manual_seed(4)
    local cfg = { vocab_size = 40, d_model = 16, d_kv = 4, d_ff = 32, num_layers = 1, num_heads = 4, dropout_rate = 0 }
    local model = slapo.models.t5(cfg):eval()
    local ids = slapo.randint(2, 40, { 2, 6 })
    local dec = slapo.randint(2, 40, { 2, 5 })
    local h = model.decoder(dec, nil, model.encoder(ids))
    close(model.lm_head(h * 0.25), model(ids, { decoder_input_ids = dec }), { rtol = 1e-6, atol = 1e-6 })
    eq(60506624, slapo.models.t5("t5-small", { device = "meta" }):num_params())
  end)

  it("refuses a call without decoder inputs, a malformed feed_forward_proj, T5 as an encoder alone, by name", function()
    local model = slapo.models.t5({ vocab_size = 40, d_model = 16, d_kv = 4, d_ff = 32, num_layers = 1, num_heads = 4 })
    matches("T5ForConditionalGeneration: give decoder_input_ids %(the decoder's tokens%) or labels",
      pcall_err(model, slapo.randint(2, 40, { 1, 4 })))
    matches("T5ForConditionalGeneration: labels hold 99, outside the vocabulary: a label is a token id from 0 to 39",
      pcall_err(model, slapo.randint(2, 40, { 1, 4 }), { labels = (slapo.ones({ 1, 3 }) * 99):long() }))
    matches("config: t5 field 'feed_forward_proj' = \"gelu%-gated\" is not '<act>' or 'gated%-<act>'",
      pcall_err(slapo.models.t5, { feed_forward_proj = "gelu-gated", num_layers = 1 }))
    matches("config: t5 field 'is_encoder_decoder' = false is not supported %(true: T5ForConditionalGeneration",
      pcall_err(slapo.models.t5, { is_encoder_decoder = false, num_layers = 1 }))
    local sch = slapo.create_schedule(model)
    sch["encoder.block.0.layer.0.SelfAttention"]:replace(slapo.nn.Module({ type = "Plain",
      forward = function(self, x) return x end }))
    matches("in .encoder.block.0.: T5Block: layer.0.SelfAttention is a Plain, not a T5Attention", pcall_err(model,
      slapo.randint(2, 40, { 1, 4 }), { decoder_input_ids = slapo.randint(2, 40, { 1, 3 }) }))
    local fresh = slapo.create_schedule(slapo.models.t5({ num_layers = 1, d_model = 8, d_kv = 4, num_heads = 2,
      d_ff = 8, vocab_size = 16 }))
    local log = fresh:log()
    matches("cut_pipeline_stage: 'encoder%.block%.0' is inside T5ForConditionalGeneration, an encoder%-decoder, which "
      .. "pipelines do not carry yet", pcall_err(function() fresh["encoder.block.0"]:cut_pipeline_stage() end))
    eq(log, fresh:log(), "nothing logged")
  end)
end)
