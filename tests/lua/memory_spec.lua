-- Tensors Lua holds are freed when unreachable, without collectgarbage(): each box charges its
-- storage's bytes to the collector (src/lua/tensor_gc.h).

-- `steps` training steps whose logits (a vocab-wide tensor) Lua holds each step and drops.
local function train_steps(steps)
  slapo.manual_seed(0)
  local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 16384, n_positions = 32,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
  local opt = slapo.optim.adamw(model, { lr = 1e-4 })
  local ids = slapo.randint(0, 16384, { 4, 32 })  -- logits: 8 MiB a step
  return function()
    for _ = 1, steps do
      opt:zero_grad()
      local logits = model(ids)
      slapo.F.cross_entropy(logits:view({ -1, 16384 }), ids:view({ -1 })):backward()
      opt:step()
    end
  end
end

describe("tensor memory", function()
  it("stays flat over hundreds of training steps", function()
    collectgarbage()
    local short = slapo.peak_tensor_mib(train_steps(20))
    collectgarbage()
    local long = slapo.peak_tensor_mib(train_steps(200))
    -- unbounded, 200 steps would hold about 10x the garbage of 20
    assert(long < 1.5 * short, ("peak %.0f MiB over 200 steps, %.0f MiB over 20"):format(long, short))
    local stats = slapo.tensor_gc_stats()
    assert(stats.collections > 0, "no collection ran for tensor memory")
    assert(stats.boxed_mib <= stats.threshold_mib, "boxed tensors above the collection threshold")
  end)

  it("collects the last step's unreachable loss (and the graph it holds) at the next backward", function()
    local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 })
    local ids = slapo.randint(0, 64, { 2, 8 })
    local weak = setmetatable({}, { __mode = "v" })
    weak.loss = model(ids, { labels = ids })
    weak.loss:backward()
    -- let 20 times the last collection's time pass: the rule bounds the time collections take (a
    -- large heap left by earlier specs makes each one slower than 2.5 ms)
    local t, wait = slapo.clock(), 20 * slapo.tensor_gc_stats().collect_seconds + 0.05
    while slapo.clock() - t < wait do end
    model(ids, { labels = ids }):backward()
    eq(nil, weak.loss, "the first step's loss survived the second backward")
  end)

  it("frees a dropped tensor's storage at the next collection the pressure triggers", function()
    collectgarbage()
    local before = slapo.tensor_gc_stats()
    local peak = slapo.peak_tensor_mib(function()
      for _ = 1, 64 do
        local _ = slapo.zeros({ 4, 1024, 1024 })  -- 16 MiB, dropped at once: 1 GiB in all
      end
    end)
    assert(peak < 3 * before.threshold_mib + 32, ("64 dropped 16 MiB tensors peaked at %.0f MiB"):format(peak))
    assert(slapo.tensor_gc_stats().collections > before.collections)
  end)
end)
