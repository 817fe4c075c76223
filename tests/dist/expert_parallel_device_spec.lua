-- shard_experts on the test device: SLAPO_TEST_DEVICE (default cpu; scripts/device-check sets cuda and
-- runs it on 2 ranks: over NCCL with a GPU each, else over Gloo with the CUDA tensors staged through the
-- CPU). The model, its rows and every routed row sent by all-to-all live there; the mean loss over the
-- ranks and every gradient equal one process's on all rows, on the same device, and a bf16 autocast
-- run trains.
local device = test_device()
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local function mixtral()
  slapo.manual_seed(3)
  return slapo.models.mixtral({ hidden_size = 32, intermediate_size = 48, num_hidden_layers = 2,
    num_attention_heads = 4, num_key_value_heads = 2, num_local_experts = 4, num_experts_per_tok = 2,
    vocab_size = 64, max_position_embeddings = 16 }):to(device)
end

local function expert_parallel()
  local sch = slapo.create_schedule(mixtral())
  for _, layer in ipairs(sch["model.layers"]:children()) do layer["block_sparse_moe"]:shard_experts() end
  return sch.mod
end

-- rows of 8 tokens, 2 a rank, on the device: all of them, and this rank's
local function rows()
  slapo.manual_seed(4)
  local all = slapo.randint(0, 64, { 2 * world, 8 }):to(device)
  return all, all:narrow(0, 2 * rank, 2)
end

local function is_expert(name) return name:find("%.experts%.") ~= nil end

-- data parallelism's average of what every rank holds whole; each expert's gradient is its own
local function average_replicated(model)
  for name, p in model:named_parameters() do
    if not is_expert(name) then
      slapo.dist.all_reduce(p.grad)
      p.grad:mul_(1 / world)
    end
  end
end

describe("shard_experts on " .. device, function()
  if world < 2 or 4 % world ~= 0 then
    it("needs 2 or 4 ranks", function() skip("run with --nproc 2") end)
    return
  end

  it("routes every rank's tokens to their experts' ranks: the loss and every gradient are one process's", function()
    local all, mine = rows()
    local ref = mixtral()
    local expected = reference.replicas_loss(ref, all, world, { output_router_logits = true })
    expected:backward()
    local model = expert_parallel()
    for name, p in model:named_parameters() do eq(device, tostring(p:device()):match("^%a+"), name) end
    local loss = model(mine, { labels = mine, output_router_logits = true })
    loss:backward()
    average_replicated(model)
    local mean = loss:detach():clone()
    slapo.dist.all_reduce(mean)
    assert(math.abs(mean:item() / world - expected:item()) < 1e-5 * expected:item(),
      ("on %s: mean loss %.7f over the ranks, one process on all rows %.7f"):format(device, mean:item() / world,
        expected:item()))
    local theirs = {}
    for name, p in ref:named_parameters() do theirs[name] = p end
    for name, p in model:named_parameters() do close(theirs[name].grad, p.grad, { rtol = 1e-4, atol = 1e-6 }) end
  end)

  it("trains under bf16 autocast: finite losses that fall", function()
    local _, mine = rows()
    local model = expert_parallel()
    local opt = slapo.optim.adamw(model, { lr = 1e-2, weight_decay = 0 })
    reference.losses_fall(5, function()
      opt:zero_grad()
      local loss = slapo.autocast("bf16", function() return model(mine, { labels = mine }) end)
      loss:backward()
      average_replicated(model)
      opt:step()
      local mean = loss:detach():float()
      slapo.dist.all_reduce(mean)
      return mean:item() / world
    end)
  end)
end)
