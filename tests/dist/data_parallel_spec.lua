-- Bucketed data parallelism on 2 ranks: gradients averaged as one all-reduce per parameter
-- would, with the buckets' all-reduces started during backward.

-- the one-rank reference the training cases compare with (tests/dist/one_rank_reference.lua), run
-- in this spec's environment so that its checks count as the case's
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local function model()
  slapo.manual_seed(13)
  return slapo.models.mlp({ hidden_size = 16, intermediate_size = 36, hidden_act = "gelu" })
end

local function batch()
  slapo.manual_seed(100 + slapo.dist.rank())  -- each rank its own batch
  return slapo.randn({ 4, 16 }), slapo.randn({ 4, 16 })
end

local function grads(m)
  local out = {}
  for name, p in m:named_parameters() do
    out[name] = p.grad:clone()
  end
  return out
end

describe("data_parallel", function()
  it("averages gradients as a per-parameter all-reduce does", function()
    local plain, bucketed = model(), model()
    local dp = slapo.dist.data_parallel(bucketed, { bucket_mb = 0.001 })
    local x, y = batch()
    slapo.F.mse_loss(plain(x), y):backward()
    for _, p in ipairs(plain:parameters()) do
      slapo.dist.all_reduce(p.grad):mul_(0.5)
    end
    slapo.F.mse_loss(bucketed(x), y):backward()
    dp:finish()
    local theirs = grads(bucketed)
    for name, g in pairs(grads(plain)) do
      close(g, theirs[name], { rtol = 1e-6, atol = 1e-7 })
    end
  end)

  it("starts every bucket during backward, the last layer's first", function()
    local m = model()
    local dp = slapo.dist.data_parallel(m, { bucket_mb = 0.001 })  -- one parameter per bucket
    local buckets = dp:buckets()
    eq(4, #buckets)
    eq({ "fc2.bias" }, buckets[1])
    eq({ "fc1.weight" }, buckets[4])
    local x, y = batch()
    slapo.F.mse_loss(m(x), y):backward()
    dp:finish()
    eq(4, dp:started_early())
  end)

  it("waits for every accumulation pass before reducing", function()
    local plain, bucketed = model(), model()
    local dp = slapo.dist.data_parallel(bucketed, { backward_passes = 2 })
    eq(1, #dp:buckets())  -- 25 MiB holds the whole MLP
    for _ = 1, 2 do
      local x, y = batch()
      slapo.F.mse_loss(plain(x), y):backward()
      slapo.F.mse_loss(bucketed(x), y):backward()
    end
    eq(0, dp:started_early())  -- the last step's count: none yet
    dp:finish()
    eq(1, dp:started_early())
    for _, p in ipairs(plain:parameters()) do
      slapo.dist.all_reduce(p.grad):mul_(0.5)
    end
    local theirs = grads(bucketed)
    for name, g in pairs(grads(plain)) do
      close(g, theirs[name], { rtol = 1e-6, atol = 1e-7 })
    end
  end)

  it("finishes without a backward (zeros), and again on the next step", function()
    local m = model()
    local dp = slapo.dist.data_parallel(m)
    dp:finish()
    for _, p in ipairs(m:parameters()) do
      eq(0, p.grad:abs():sum():item())
    end
    local x, y = batch()
    slapo.F.mse_loss(m(x), y):backward()
    dp:finish()
    assert(m.fc1.weight.grad:abs():sum():item() > 0, "the second step's gradients arrived")
  end)

  it("trains like per-parameter averaging over several AdamW steps", function()
    local plain, bucketed = model(), model()
    local opts = { slapo.optim.adamw(plain, { lr = 1e-2 }), slapo.optim.adamw(bucketed, { lr = 1e-2 }) }
    local dp = slapo.dist.data_parallel(bucketed, { bucket_mb = 0.002 })
    for _ = 1, 3 do
      local x, y = batch()
      for i, m in ipairs({ plain, bucketed }) do
        opts[i]:zero_grad()
        slapo.F.mse_loss(m(x), y):backward()
      end
      for _, p in ipairs(plain:parameters()) do
        slapo.dist.all_reduce(p.grad):mul_(0.5)
      end
      dp:finish()
      opts[1]:step()
      opts[2]:step()
    end
    local theirs = {}
    for name, p in bucketed:named_parameters() do
      theirs[name] = p
    end
    for name, p in plain:named_parameters() do
      close(p, theirs[name], { rtol = 1e-5, atol = 1e-6 })
    end
  end)

  it("refuses a bucket size that is not positive", function()
    eq("data_parallel: bucket_mb must be positive, got 0",
      pcall_err(slapo.dist.data_parallel, model(), { bucket_mb = 0 }))
  end)
end)

describe("slapo.train over a data-parallel layout", function()
  local tiny_gpt2 = reference.tiny_gpt2

  it("logs the step's mean loss over the replicas, the same on every rank, as one rank on all rows", function()
    local layout = require("slapo.parallel").layout({ tp = 1 })
    local all, mine = reference.rows()
    local ref, ref_losses, ref_norms = reference.train(all, 3, 0.5)
    local result = slapo.train({ model = tiny_gpt2(), steps = 3, lr = 1e-2, schedule = "constant", clip = 0.5,
      quiet = true, layout = layout, data = function() return mine end })
    reference.check(result, ref, ref_losses, ref_norms)
  end)

  it("clips over a TP layout's group when no group is given, as one rank on the whole model", function()
    if slapo.dist.world_size() ~= 2 then
      skip("TP = 2 on exactly 2 ranks")
    end
    local layout = require("slapo.parallel").layout({ tp = 2 })
    slapo.manual_seed(4)
    local ids = slapo.randint(0, 64, { 2, 8 })
    local ref = tiny_gpt2()  -- one step: later ones drift apart with TP's rounding, which AdamW amplifies
    ref(ids, { labels = ids }):backward()
    local ref_norm = slapo.clip_grad_norm(ref, 0.5)
    local sch = slapo.create_schedule(tiny_gpt2(), { group = layout.tp_group })
    require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
    local path = "/tmp/slapo-tp-metrics-" .. os.getenv("MASTER_PORT") .. "-" .. slapo.dist.rank()
    local result = slapo.train({ model = slapo.build(sch), steps = 1, lr = 1e-2, clip = 0.5, quiet = true,
      layout = layout, metrics = path, data = function() return ids end })
    if slapo.dist.rank() == 0 then  -- the logged norm (6 digits)
      local logged = slapo.json_decode(io.open(path):read("*a")).grad_norm
      os.remove(path)
      assert(math.abs(logged - ref_norm) < 1e-5 * ref_norm, ("logged grad norm %.7f, one rank %.7f"):format(logged,
        ref_norm))
    end
    assert(math.abs(result.grad_norms[1] - ref_norm) < 1e-5 * ref_norm,
      ("grad norm %.7f, one rank %.7f"):format(result.grad_norms[1], ref_norm))
  end)

  it("gives each replica synthetic rows of its own", function()
    local layout = require("slapo.parallel").layout({ tp = 1 })
    local spec = { vocab = 64, batch = 2, seq = 8 }
    local mine = require("slapo.train").synthetic(spec, layout.dp_rank)(1, 1)
    local gathered = slapo.dist.all_gather(mine, 0)
    for r = 1, slapo.dist.world_size() - 1 do
      assert(not gathered:narrow(0, 0, 2):equal(gathered:narrow(0, 2 * r, 2)),
        "replica " .. r .. " has rows of its own")
    end
    eq(true, mine:equal(require("slapo.train").synthetic(spec)(1, 1)) == (layout.dp_rank == 0))
  end)
end)
