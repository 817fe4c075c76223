-- Mixtral from transformers' own code (tests/fixtures/hf/mixtral-tiny: 4 experts, top-2, grouped-query
-- attention; provenance.md): logits, masked logits, loss, the loss with the load-balancing term and
-- every gradient; routing that drops no token; presets; refusals by name.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local fixtures = os.getenv("SLAPO_HF_FIXTURES") or (here .. "/../fixtures/hf")
local dir = fixtures .. "/mixtral-tiny"

local function relative(a, b)
  return ((a - b):abs():max() / b:abs():max()):item()
end

local function tiny(extra)
  local cfg = { hidden_size = 32, intermediate_size = 48, num_hidden_layers = 2, num_attention_heads = 4,
    num_key_value_heads = 2, num_local_experts = 4, num_experts_per_tok = 2, vocab_size = 64,
    max_position_embeddings = 32 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  slapo.manual_seed(0)
  return slapo.models.mixtral(cfg)
end

describe("Mixtral from transformers' checkpoint", function()
  local expected = slapo.load_tensors(dir .. "/expected.safetensors")

  it("computes transformers' logits, with and without padding, with its names", function()
    local model = slapo.models.from_pretrained(dir):eval()
    eq("MixtralForCausalLM", model:type())
    eq("MixtralSparseMoeBlock", model.model.layers["0"].block_sparse_moe:type())
    eq("top_k=2", model.model.layers["0"].block_sparse_moe:describe())
    local experts = slapo.create_schedule(model)["model.layers.1.block_sparse_moe.experts"]
    eq(4, #experts:children())
    local rel = relative(model(expected.input_ids), expected.logits)
    assert(rel < 1e-5, ("logits differ from transformers' by %.3g relative"):format(rel))
    assert(expected.attention_mask:sum():item() < expected.attention_mask:numel(), "the fixture pads a row")
    rel = relative(model(expected.input_ids, { attention_mask = expected.attention_mask }), expected.logits_masked)
    assert(rel < 1e-5, ("masked logits differ from transformers' by %.3g relative"):format(rel))
  end)

  it("has transformers' loss, its loss with the load-balancing term (router_aux_loss_coef 0.02), every gradient",
    function()
    local model = slapo.models.from_pretrained(dir):eval()
    local ids = expected.input_ids
    local with_aux = model(ids, { labels = ids, output_router_logits = true }):item()
    assert(math.abs(with_aux - expected.loss_with_aux:item()) < 1e-5 * expected.loss_with_aux:item(),
      ("loss with aux %.7f, transformers' %.7f"):format(with_aux, expected.loss_with_aux:item()))
    local loss = model(ids, { labels = ids })
    assert(math.abs(loss:item() - expected.loss:item()) < 1e-5 * expected.loss:item(),
      ("loss %.7f, transformers' %.7f"):format(loss:item(), expected.loss:item()))
    -- the term itself, to the fixture's aux_loss
    local aux = (with_aux - loss:item()) / 0.02
    assert(math.abs(aux - expected.aux_loss:item()) < 1e-4 * expected.aux_loss:item(),
      ("aux loss %.7f, transformers' %.7f"):format(aux, expected.aux_loss:item()))
    -- without labels, asked for it: the logits and transformers' aux_loss
    local out = model(ids, { output_router_logits = true })
    close(model(ids), out[1], { rtol = 0, atol = 0 })
    assert(math.abs(out[2]:item() - expected.aux_loss:item()) < 1e-5 * expected.aux_loss:item(),
      ("aux_loss %.7f without labels, transformers' %.7f"):format(out[2]:item(), expected.aux_loss:item()))
    loss:backward()
    local largest, wanted, checked = 0, 0, 0
    for key, t in pairs(expected) do
      if key:match("^grad%.") then largest, wanted = math.max(largest, t:abs():max():item()), wanted + 1 end
    end
    for name, p in model:named_parameters() do
      local want = expected["grad." .. name]
      assert(want, "transformers has no gradient for " .. name)
      local rel = (p.grad - want):abs():max():item() / math.max(want:abs():max():item(), 1e-3 * largest)
      assert(rel < 1e-4, ("%s's gradient differs by %.3g relative"):format(name, rel))
      checked = checked + 1
    end
    eq(wanted, checked, "gradients compared, of those transformers computed")
  end)

  it("adds the load-balancing term when the config sets output_router_logits, and the router learns from it", function()
    local cfg = slapo.models.config(slapo.models.from_pretrained(dir))
    cfg.output_router_logits = true
    local model = slapo.models.from_pretrained(dir)
    local asked = slapo.models.mixtral(cfg)
    asked:load_state_dict(model:state_dict())
    asked:eval()
    local ids = expected.input_ids
    local loss = asked(ids, { labels = ids })
    assert(math.abs(loss:item() - expected.loss_with_aux:item()) < 1e-5 * expected.loss_with_aux:item())
    local plain = asked(ids, { labels = ids, output_router_logits = false }):item()
    assert(math.abs(plain - expected.loss:item()) < 1e-6 * expected.loss:item(), ("loss without the term %.7f, "
      .. "transformers' %.7f"):format(plain, expected.loss:item()))
  end)
end)

describe("Mixtral's routing", function()
  it("drops no token: a router that sends every token to one expert computes that expert on all of them", function()
    local block = tiny({ num_experts_per_tok = 1 }).model.layers["0"].block_sparse_moe
    -- positive inputs and a gate that is zero but for expert 2's row of ones: expert 2 wins every token
    local rows = {}
    for e = 0, 3 do
      rows[e + 1] = {}
      for i = 1, 32 do rows[e + 1][i] = e == 2 and 1 or 0 end
    end
    block.gate.weight:detach():copy_(slapo.tensor(rows))
    local x = slapo.rand({ 2, 8, 32 }) + 0.1
    local out = block(x)
    local all_to_one = block.experts["2"](x:reshape({ 16, 32 })):reshape({ 2, 8, 32 })
    close(all_to_one, out[1], { rtol = 1e-6, atol = 1e-6 })
    eq({ 16, 4 }, out[2]:size())  -- the router's logits, for the load-balancing loss
    -- and it trains: expert 2 gets every token's gradient, the others none
    out[1]:sum():backward()
    local moved = {}
    for i = 0, 3 do
      local g = block.experts[tostring(i)].w1.weight.grad
      moved[i + 1] = g ~= nil and g:abs():sum():item() > 0
    end
    eq({ false, false, true, false }, moved)
  end)

  it("builds the presets as Mistral AI's configs say", function()
    local m = slapo.models.build("Mixtral-8x7B-v0.1", { device = "meta" })
    eq(46702792704, m:num_params())  -- transformers' count for mistralai/Mixtral-8x7B-v0.1
    local c = slapo.models.config(m)
    eq({ 8, 2, 32768 }, { c.num_local_experts, c.num_experts_per_tok, c.max_position_embeddings })
    local big = slapo.models.config(slapo.models.build("Mixtral-8x22B-v0.1", { device = "meta" }))
    eq({ 6144, 56, 48, 32768 }, { big.hidden_size, big.num_hidden_layers, big.num_attention_heads, big.vocab_size })
  end)

  it("verifies under its reference schedule with fused RMSNorms and checkpointed layers", function()
    local sch = slapo.create_schedule(tiny())
    require("slapo.schedules.mixtral").schedule(sch, { fuse = "all", checkpoint = 0.5 })
    eq("FusedRMSNorm", sch["model.layers.1.input_layernorm"].mod:type())
    local ids = slapo.randint(0, 64, { 2, 8 })
    local report = slapo.verify(sch, { ids, { labels = ids, output_router_logits = true } })
    eq(0, report.no_gradient)
    assert(report.gradients > 0 and report.max_grad_diff < 1e-5, "gradients as the unscheduled model's")
  end)

  -- `other`'s loss (with the load-balancing term) and every gradient against the gathered compute's
  local function same_as_gathered(other, loss_rtol, grad_rtol)
    local gathered, ids = tiny(), slapo.randint(0, 64, { 2, 8 })
    local a = gathered(ids, { labels = ids, output_router_logits = true })
    local b = other(ids, { labels = ids, output_router_logits = true })
    close(a, b, { rtol = loss_rtol, atol = 1e-6 })
    a:backward()
    b:backward()
    local theirs = {}
    for name, p in other:named_parameters() do theirs[name] = p end
    for name, p in gathered:named_parameters() do close(p.grad, theirs[name].grad, { rtol = grad_rtol, atol = 1e-6 }) end
  end

  it("computes the same densely (every expert on every token) as gathered, forward and backward", function()
    local dense = tiny()
    eq(2, slapo.models.expert_compute(dense, "dense"))
    matches("top_k=2, dense", dense.model.layers["0"].block_sparse_moe:describe())
    same_as_gathered(dense, 1e-6, 1e-5)
    eq(2, slapo.models.expert_compute(dense, "gathered"))
    eq("top_k=2, gathered", dense.model.layers["0"].block_sparse_moe:describe())
    eq(2, slapo.models.expert_compute(dense, "auto"))
    eq("top_k=2", dense.model.layers["0"].block_sparse_moe:describe())
    matches("models.expert_compute: unknown mode 'sparse' %(choices: auto, gathered, grouped, dense%)",
      pcall_err(slapo.models.expert_compute, dense, "sparse"))
    matches("models.expert_compute: LlamaForCausalLM holds no sparse MoE block", pcall_err(slapo.models.expert_compute,
      slapo.models.llama({ hidden_size = 32, intermediate_size = 48, num_hidden_layers = 1, num_attention_heads = 4,
        vocab_size = 64 }), "dense"))
  end)

  -- On the GPU, tests/lua/moe_grouped_device_spec.lua compares it in bf16 and under autocast.
  it("runs every expert's projections in one grouped matmul where LibTorch has one, or refuses by name", function()
    local grouped = tiny()
    local ok, err = pcall(slapo.models.expert_compute, grouped, "grouped")
    if not ok then
      matches('expert_compute: "grouped" runs LibTorch\'s grouped matmul %(_grouped_mm%), which LibTorch %d+%.%d+ does '
        .. "not have %(2%.9 and later do%); choices here: auto, gathered, dense", err)
      return
    end
    eq("top_k=2, grouped", grouped.model.layers["0"].block_sparse_moe:describe())
    same_as_gathered(grouped, 1e-5, 1e-4)
  end)

  it("refuses by name what it does not compute", function()
    matches("mixtral: num_experts_per_tok 5 is more than num_local_experts 4",
      pcall_err(tiny, { num_experts_per_tok = 5 }))
    matches("config: mixtral field 'num_local_experts' must be an integer from 1",
      pcall_err(tiny, { num_local_experts = 0 }))
    -- another MoE family's fields (Qwen2-MoE's shared expert, DeepSeek's grouped routing) are not Mixtral's
    matches("shared_expert_intermediate_size", pcall_err(tiny, { shared_expert_intermediate_size = 64 }))
    matches("topk_group", pcall_err(tiny, { topk_group = 2 }))
    local model = tiny()
    local ids = slapo.randint(0, 64, { 1, 4 })
    matches("MixtralForCausalLM: keyword 'output_router_logits' must be true or false",
      pcall_err(function() return model(ids, { output_router_logits = ids }) end))
    matches("unknown keyword 'output_router_logit' %(did you mean 'output_router_logits'%?%)",
      pcall_err(function() return model(ids, { output_router_logit = true }) end))
  end)
end)
