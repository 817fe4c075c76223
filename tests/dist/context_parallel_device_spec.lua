-- context_parallel on the test device: SLAPO_TEST_DEVICE (default cpu; scripts/device-check sets cuda
-- and runs it on 2 ranks: over NCCL with a GPU each, else over Gloo with the CUDA tensors staged
-- through the CPU). The model, its rows and every block of keys and values exchanged live there; the
-- split model's whole-sequence loss and its gradients averaged over the group equal one process's on
-- the same device, by the ring and by all-to-all, and a bf16 autocast step trains.
local parallel = require("slapo.parallel")
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()
local device = test_device()
local world = slapo.dist.world_size()

local function llama()
  slapo.manual_seed(3)
  return slapo.models.llama({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
    num_key_value_heads = 2, intermediate_size = 64, vocab_size = 64, max_position_embeddings = 1024 }):to(device)
end

-- the same rows on every rank, on the device
local function batch(rows, seq)
  slapo.manual_seed(9)
  return slapo.randint(0, 64, { rows, seq }):to(device)
end

local function split_over_ranks(method)
  local layout = parallel.layout({ cp = world })
  local sch = slapo.create_schedule(llama(), { group = layout.tp_group })
  sch:context_parallel({ group = layout.cp_group, method = method })
  return slapo.build(sch), layout
end

describe("context_parallel on " .. device, function()
  if world < 2 then
    it("needs 2 ranks or more", function() skip("run with --nproc 2") end)
    return
  end
  for _, method in ipairs({ "ring", "all_to_all" }) do
    it(("splits each sequence by %s: the whole sequence's loss and gradients are one process's"):format(method),
      function()
        local ids = batch(2, 64)
        local ref = llama()
        local expected = ref(ids, { labels = ids })
        expected:backward()
        local model, layout = split_over_ranks(method)
        for name, p in model:named_parameters() do eq(device, tostring(p:device()):match("^%a+"), name) end
        local loss = model(ids, { labels = ids })
        loss:backward()
        assert(math.abs(loss:item() - expected:item()) < 1e-5 * expected:item(),
          ("%s on %s: loss %.7f split over %d ranks, %.7f in one process"):format(method, device, loss:item(), world,
            expected:item()))
        layout:all_reduce_grads(model)
        local theirs = {}
        for name, p in ref:named_parameters() do theirs[name] = p end
        -- each rank sums its part of every gradient: float32 rounding of a different order
        for name, p in model:named_parameters() do
          close(theirs[name].grad, p.grad, { rtol = 1e-4, atol = 5e-6 })
        end
      end)
  end

  it("trains under bf16 autocast by the ring: finite losses that fall", function()
    local ids = batch(2, 64)
    local model, layout = split_over_ranks("ring")
    local opt = slapo.optim.adamw(model, { lr = 1e-2, weight_decay = 0 })
    reference.losses_fall(5, function()
      opt:zero_grad()
      local loss = slapo.autocast("bf16", function() return model(ids, { labels = ids }) end)
      loss:backward()
      layout:all_reduce_grads(model)
      opt:step()
      return loss:item()
    end)
  end)
end)
