-- slapo.optim.adamw's multi-tensor paths give torch::optim::AdamW's results.

local function model_and_batch(dtype)
  slapo.manual_seed(0)
  local m = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64, n_positions = 16,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
  if dtype then m:to(dtype) end
  return m, slapo.randint(0, 64, { 2, 12 })
end

-- parameters after `steps` AdamW steps with the given impl
local function trained(impl, dtype, steps)
  local m, ids = model_and_batch(dtype)
  local opt = slapo.optim.adamw(m, { lr = 1e-2, weight_decay = 0.1, impl = impl })
  for _ = 1, steps do
    opt:zero_grad()
    m(ids, { labels = ids }):backward()
    opt:step()
  end
  return m:state_dict(), opt, m
end

local function max_rel_diff(a, b)
  local worst = 0
  for name, t in pairs(a) do
    local ref = b[name]:to("float64")
    local d = ((t:to("float64") - ref):abs():max() / (ref:abs():max() + 1e-12)):item()
    worst = math.max(worst, d)
  end
  return worst
end

describe("optim.adamw", function()
  -- Adam divides by sqrt(v): after several steps a rounding difference in a near-zero gradient
  -- becomes a visible one, so float32 compares one step and float64 several.
  it("fused (one pass per tensor) matches torch's per-parameter AdamW", function()
    local diff = max_rel_diff(trained("fused", "float32", 1), trained("loop", "float32", 1))
    assert(diff < 1e-6, "float32: fused differs from torch by " .. diff)
    diff = max_rel_diff(trained("fused", "float64", 4), trained("loop", "float64", 4))
    assert(diff < 1e-10, "float64: fused differs from torch by " .. diff)
  end)

  it("foreach (ATen's multi-tensor ops) matches torch's AdamW, bfloat16 included", function()
    eq(0, max_rel_diff(trained("foreach", "float32", 4), trained("loop", "float32", 4)))
    local diff = max_rel_diff(trained("foreach", "bfloat16", 3), trained("loop", "bfloat16", 3))
    assert(diff < 1e-2, "bfloat16 foreach differs by " .. diff)
  end)

  it("keeps torch's state layout, so checkpoints of either impl resume the other", function()
    local _, fused, m = trained("fused", "float32", 2)
    local state = fused:state_tensors(m)
    eq(2, state["transformer.wte.weight.step"]:item())
    local loop = slapo.optim.adamw(m, { lr = 1e-2, weight_decay = 0.1, impl = "loop" })
    loop:load_state_tensors(m, state)
    eq(state["transformer.wte.weight.exp_avg"]:tolist(), loop:state_tensors(m)["transformer.wte.weight.exp_avg"]:tolist())
  end)

  it("names the valid choices for an unknown impl", function()
    local m = model_and_batch()
    matches("optim.adamw: unknown impl 'fast' %(valid: auto, fused, foreach, loop%)",
      select(2, pcall(slapo.optim.adamw, m, { impl = "fast" })))
  end)
end)
