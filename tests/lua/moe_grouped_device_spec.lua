-- A mixture of experts' grouped compute on the test device (SLAPO_TEST_DEVICE, default cpu;
-- scripts/device-check sets cuda): each projection of every expert in one grouped matmul
-- (LibTorch's _grouped_mm, 2.9 and later) against each expert called on its rows, in bf16 weights
-- and under bf16 autocast, with experts that get no rows, and what "auto" picks there. On a CPU, or
-- a LibTorch without the grouped matmul, the cases are skipped with their reason.
local device = test_device()

local function tiny(extra)
  -- widths that are multiples of 16 bytes in bf16, as the grouped kernel reads its operands
  local cfg = { hidden_size = 64, intermediate_size = 128, num_hidden_layers = 2, num_attention_heads = 4,
    num_key_value_heads = 2, num_local_experts = 4, num_experts_per_tok = 2, vocab_size = 128,
    max_position_embeddings = 64 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  slapo.manual_seed(0)
  return slapo.models.mixtral(cfg):to(device)
end

-- Skips unless this is a GPU whose LibTorch has the grouped matmul.
local function needs_grouped()
  if device == "cpu" then skip("needs SLAPO_TEST_DEVICE=cuda: auto picks the grouped matmul for CUDA rows in bf16") end
  local ok, err = pcall(slapo.models.expert_compute, tiny(), "grouped")
  if not ok then skip(tostring(err)) end
end

-- The loss and every gradient of `model` on `ids`, in `mode`, optionally under bf16 autocast.
local function run(model, mode, ids, autocast)
  slapo.models.expert_compute(model, mode)
  local function forward() return model(ids, { labels = ids, output_router_logits = true }) end
  local loss = autocast and slapo.autocast("bf16", forward) or forward()
  loss:backward()
  local grads = {}
  for name, p in model:named_parameters() do grads[name] = p.grad:float() end
  return loss:item(), grads
end

-- Two runs' gradients agree to bf16's rounding: each within 5% of the other's norm (plus a floor).
local function same_grads(a, b, where)
  local compared = 0
  for name, g in pairs(a) do
    local diff, norm = (g - b[name]):norm():item(), b[name]:norm():item()
    assert(diff <= 0.05 * norm + 1e-3, ("%s: '%s' differs by %.3g (norm %.3g)"):format(where, name, diff, norm))
    compared = compared + 1
  end
  assert(compared > 10, "compared " .. compared .. " gradients")
end

describe("grouped expert compute on " .. device, function()
  it("equals each expert called on its rows, in bf16 weights, and auto picks it", function()
    needs_grouped()
    local ids = slapo.randint(0, 128, { 4, 32 }):to(device)
    local gathered, g1 = run(tiny():to("bfloat16"), "gathered", ids)
    local grouped, g2 = run(tiny():to("bfloat16"), "grouped", ids)
    local auto = run(tiny():to("bfloat16"), "auto", ids)
    assert(math.abs(grouped - gathered) < 0.02 * math.abs(gathered), ("loss %.5f grouped, %.5f gathered"):format(
      grouped, gathered))
    same_grads(g2, g1, "bf16 weights")
    -- the lease's GPUs are Hopper (H100, H200), where auto takes the grouped kernel
    eq(grouped, auto, "auto runs the grouped matmul on a Hopper GPU's rows in bf16")
  end)

  it("equals it under bf16 autocast, float32 weights", function()
    needs_grouped()
    local ids = slapo.randint(0, 128, { 4, 32 }):to(device)
    local gathered, g1 = run(tiny(), "gathered", ids, true)
    local grouped, g2 = run(tiny(), "grouped", ids, true)
    assert(math.abs(grouped - gathered) < 0.02 * math.abs(gathered))
    same_grads(g2, g1, "autocast")
  end)

  it("trains experts that get no rows (a zero gradient each), and leaves a changed expert to auto's gathered path", function()
    needs_grouped()
    local ids = slapo.randint(0, 128, { 1, 1 }):to(device)  -- one token, top-2 of 4: two experts get nothing
    local _, g1 = run(tiny():to("bfloat16"), "gathered", ids)
    local _, g2 = run(tiny():to("bfloat16"), "grouped", ids)
    same_grads(g2, g1, "one token")
    local sch = slapo.create_schedule(tiny():to("bfloat16"))
    sch["model.layers.0.block_sparse_moe.experts.0"]:checkpoint()
    matches('expert_compute "grouped" needs the zoo\'s experts as built', pcall_err(run, sch.mod, "grouped", ids))
    run(sch.mod, "auto", ids)  -- the changed block's experts are called one by one
  end)
end)
