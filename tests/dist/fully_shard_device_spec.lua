-- fully_shard on the test device: SLAPO_TEST_DEVICE (default cpu; scripts/device-check sets cuda and
-- runs it on NCCL ranks, one a GPU). The model, its rows and every gathered and reduced tensor live
-- there; the fully sharded model trains as one unsharded model on all ranks' rows.

local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local device = test_device()
local world = slapo.dist.world_size()

local function fully_sharded(model)
  local sch = slapo.create_schedule(model)
  for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard() end
  sch:fully_shard()
  return sch
end

-- AdamW steps of the model on its rows; the mean loss over the ranks each step.
local function train(model, rows, steps)
  local opt = slapo.optim.adamw(model, { lr = 1e-2, weight_decay = 0 })
  local losses = {}
  for step = 1, steps do
    opt:zero_grad()
    local loss = model(rows, { labels = rows })
    loss:backward()
    opt:step()
    local mean = loss:detach():clone()
    slapo.dist.all_reduce(mean)
    losses[step] = mean:item() / world
  end
  return losses
end

describe("fully_shard on " .. device, function()
  it("trains as one unsharded model on all ranks' rows, in float32", function()
    local all, mine = reference.rows()
    local _, ref_losses = reference.train(all, 3, false, nil, { n_layer = 2 })
    local sch = fully_sharded(reference.tiny_gpt2({ n_layer = 2 }):to(device))
    for name, p in sch.mod:named_parameters() do eq(device, tostring(p:device()):match("^%a+"), name) end
    local losses = train(sch.mod, mine:to(device), 3)
    for step = 1, 3 do
      assert(math.abs(losses[step] - ref_losses[step]) < 1e-5 * ref_losses[step],
        ("step %d: fully sharded on %s %.7f, one rank on all rows %.7f"):format(step, device, losses[step],
          ref_losses[step]))
    end
  end)

  it("trains in bfloat16 weights: finite losses that fall", function()
    local _, mine = reference.rows()
    local sch = fully_sharded(reference.tiny_gpt2({ n_layer = 2 }):to(device):to("bfloat16"))
    local losses = train(sch.mod, mine:to(device), 5)
    for step, loss in ipairs(losses) do assert(loss == loss and loss < math.huge, ("step %d: loss %s"):format(step, loss)) end
    assert(losses[5] < losses[1], ("loss %.4f after 5 steps, %.4f at the first"):format(losses[5], losses[1]))
  end)
end)
