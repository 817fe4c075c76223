-- Tensor parallelism on real ranks: shard + sync verified against the unsharded model
-- (outputs and gathered gradients), after Slapo's test_shard.py and test_reshard.py.
local world = slapo.dist.world_size()

local function mlp()
  slapo.manual_seed(42)  -- every rank builds the same full model
  return slapo.models.mlp({ hidden_size = 16, intermediate_size = 32, hidden_act = "gelu" })
end

local function megatron_mlp(sch)
  sch["fc1"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
  sch["fc2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
end

describe("tensor parallel MLP", function()
  it("column-then-row sharding equals the unsharded model in outputs and gradients", function()
    local sch = slapo.create_schedule(mlp())
    local x = slapo.randn({ 4, 16 })
    local report = slapo.verify(sch, { x }, { rtol = 1e-5, atol = 1e-5 }, megatron_mlp)
    eq(1, report.outputs)
    eq(4, report.gradients)
    eq({ 32 / world, 16 }, sch["fc1"].mod.weight:size())
    eq({ 16, 32 / world }, sch["fc2"].mod.weight:size())
    eq({ 32, 16 }, sch["fc1"]:param_info("weight").full_shape)
  end)

  it("fails verify without the forward all-reduce, naming the output", function()
    local sch = slapo.create_schedule(mlp())
    local err = pcall_err(slapo.verify, sch, { slapo.randn({ 4, 16 }) }, {}, function(s)
      s["fc1"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
      s["fc2"]:shard("weight", 1)
    end)
    matches("verify: output 1 differs", err)
    matches("the first module whose output differs is 'fc2'", err)
  end)

  it("fails verify without the backward all-reduce, naming the gradient", function()
    local sch = slapo.create_schedule(mlp())
    local model = slapo.nn.Sequential({ slapo.nn.Linear(16, 16), mlp() })
    sch = slapo.create_schedule(model)
    local err = pcall_err(slapo.verify, sch, { slapo.randn({ 4, 16 }) }, {}, function(s)
      s["1.fc1"]:shard("weight", 0):shard("bias", 0)
      s["1.fc2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    end)
    matches("verify: the gradient of '0%.weight' differs", err)
  end)

  -- the unsharded MLP and its Megatron copy, built
  local function reference_and_megatron()
    local sch = slapo.create_schedule(mlp())
    megatron_mlp(sch)
    return mlp(), slapo.build(sch)
  end

  it("clip_grad_norm with no group counts shards split over the whole world once", function()
    local ref, model = reference_and_megatron()
    slapo.manual_seed(8)
    local x, y = slapo.randn({ 8, 16 }), slapo.randn({ 8, 16 })
    slapo.F.mse_loss(ref(x), y):backward()
    slapo.F.mse_loss(model(x), y):backward()
    local theirs, ours = slapo.clip_grad_norm(ref, 1e9), slapo.clip_grad_norm(model, 1e9)
    assert(math.abs(theirs - ours) < 1e-5 * theirs, ("one rank's norm %.8f, the sharded model's %.8f"):format(theirs, ours))
  end)

  it("trains like the single-rank model for a few SGD steps", function()
    local ref, model = reference_and_megatron()
    slapo.manual_seed(7)
    local x, y = slapo.randn({ 8, 16 }), slapo.randn({ 8, 16 })
    local optimizers = { slapo.optim.sgd(ref, { lr = 0.1 }), slapo.optim.sgd(model, { lr = 0.1 }) }
    for _ = 1, 3 do
      for i, m in ipairs({ ref, model }) do
        optimizers[i]:zero_grad()
        slapo.F.mse_loss(m(x), y):backward()
        optimizers[i]:step()
      end
    end
    close(ref(x), model(x), { rtol = 1e-4, atol = 1e-5 })
  end)
end)

describe("the reference schedules", function()
  it("refuse heads that do not split over the ranks before any shard, with the sizes that would", function()
    local world = slapo.dist.world_size()
    local heads = world + 1  -- never a multiple of the world (2 ranks or more)
    local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 8 * heads, n_head = heads, n_layer = 1,
      vocab_size = 32, n_positions = 16 }))
    local log = sch:log()
    matches(("schedule: %d attention heads do not split over %d tensor%%-parallel ranks %%(the schedule's group%%); "
      .. "valid sizes: 1"):format(heads, world), pcall_err(function()
        require("slapo.schedules.gpt2").schedule(sch, {})
      end))
    eq(log, sch:log())
  end)

  it("verify a model made under init_empty_weights: both get build's values, the slices of the same tensors",
    function()
      -- Slapo's test_meta_distributed and test_reshard verify TP schemes on empty models
      local model = slapo.init_empty_weights(function()
        return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64, n_positions = 16,
          resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
      end)
      local sch = slapo.create_schedule(model)
      slapo.manual_seed(2)
      local ids = slapo.randint(0, 64, { 2, 8 })
      local report = slapo.verify(sch, { ids }, { rtol = 1e-4, atol = 1e-5 }, function(s)
        require("slapo.schedules.gpt2").schedule(s, { fork_rng = false })
      end)
      eq(1, report.outputs)
      eq(report.params, report.gradients, "every gradient compared, gathered")
      eq("cpu", sch.mod.transformer.wte.weight:device(), "materialised for the comparison, as build does")
      -- and build afterwards keeps those values
      local before = sch.mod.transformer.wpe.weight:clone()
      assert(before:equal(slapo.build(sch).transformer.wpe.weight), "build keeps what verify materialised")
    end)
end)

describe("reshard", function()
  local layouts = { "RR", "RS", "SR" }
  for _, src in ipairs(layouts) do
    for _, dst in ipairs(layouts) do
      it(src .. "->" .. dst .. " round-trips values and gradients", function()
        slapo.manual_seed(1)
        local model = slapo.nn.Sequential({ slapo.nn.Linear(8, 8), slapo.nn.Identity() })
        local sch = slapo.create_schedule(model)
        local report = slapo.verify(sch, { slapo.randn({ 2, 4, 8 }) }, {}, function(s)
          s["1"]:sync("fwd_pre", "RR->" .. src)
          s["1"]:sync("fwd_post", src .. "->" .. dst)
          s["1"]:sync("fwd_post", dst .. "->RR")
        end)
        eq(3, select(2, sch:log():gsub(":sync%(", "")), "the three reshards are applied")
        eq(1, report.outputs)
        eq(report.params, report.gradients, "every parameter's gradient compared")
      end)
    end
  end
end)

describe("fork_rng across ranks", function()
  local function masks(fork)
    local sch = slapo.create_schedule(slapo.nn.Sequential({ slapo.nn.Dropout(0.5) }))
    if fork then
      sch["0"]:fork_rng(0)
    end
    slapo.manual_seed(123)  -- the same default seed on every rank
    local mask = sch.mod(slapo.ones({ 1, 256 }))
    return slapo.dist.all_gather(mask, 0)
  end

  it("makes dropout masks differ across ranks", function()
    local all = masks(true)
    assert(not all:narrow(0, 0, 1):equal(all:narrow(0, 1, 1)))
  end)

  it("leaves them equal without it", function()
    local all = masks(false)
    assert(all:narrow(0, 0, 1):equal(all:narrow(0, 1, 1)))
  end)

  it("keeps checkpointed gradients bit-identical with forked dropout", function()
    local function model()
      slapo.manual_seed(8)
      return slapo.nn.Sequential({ slapo.nn.Linear(16, 16), slapo.nn.Sequential({ slapo.nn.Linear(16, 16),
        slapo.nn.Dropout(0.3), slapo.nn.Linear(16, 16) }) })
    end
    local grads = {}
    for i, ckpt in ipairs({ false, true }) do
      local sch = slapo.create_schedule(model())
      sch["1.1"]:fork_rng(0)
      if ckpt then
        sch["1"]:checkpoint()
      end
      slapo.manual_seed(4)
      sch.mod(slapo.randn({ 4, 16 })):sum():backward()
      grads[i] = sch.mod["0"].weight.grad
    end
    assert(grads[1]:equal(grads[2]))
  end)
end)

describe("verify on ranks that disagree", function()
  it("names the parameter when the ranks built different models", function()
    slapo.manual_seed(100 + slapo.dist.rank())  -- a different seed per rank
    local sch = slapo.create_schedule(slapo.models.mlp({ hidden_size = 8, intermediate_size = 16 }))
    local err = pcall_err(slapo.verify, sch, { slapo.randn({ 2, 8 }) }, {}, megatron_mlp)
    eq("verify: parameter 'fc1.weight' of the unscheduled model differs between ranks; build the model from the same "
      .. "seed on every rank (slapo.manual_seed before building)\nverify: rolled back the 5 primitives fn applied; "
      .. "the schedule, its log and the model are as before verify", err)
  end)

  it("shards parameters that already hold gradients of a graph still alive", function()
    local model = mlp()
    local x = slapo.randn({ 4, 16 })
    local loss = model(x):sum()
    loss:backward()
    local sch = slapo.create_schedule(model)
    slapo.verify(sch, { x }, {}, megatron_mlp)
    assert(loss ~= nil)
  end)
end)

describe("build", function()
  it("initialises sharded parameters as the single-rank model would be", function()
    local one = slapo.create_schedule(mlp())
    slapo.build(one, { init_weights = true, seed = 11 })
    local two = slapo.create_schedule(mlp())
    megatron_mlp(two)
    slapo.build(two, { init_weights = true, seed = 11 })
    assert(slapo.dist.all_gather(two["fc1"].mod.weight, 0):equal(one["fc1"].mod.weight))
    assert(slapo.dist.all_gather(two["fc2"].mod.weight, 1):equal(one["fc2"].mod.weight))
    assert(two["fc2"].mod.bias:equal(one["fc2"].mod.bias))
  end)
end)

describe("slapo.op.LinearWithSync", function()
  it("column then row equals the unsharded MLP in outputs and gathered gradients", function()
    slapo.manual_seed(31)
    local model = slapo.models.mlp({ hidden_size = 16, intermediate_size = 32, hidden_act = "gelu" })
    slapo.manual_seed(32)
    local report = slapo.verify(slapo.create_schedule(model), { slapo.randn({ 4, 16 }) }, {}, function(sch)
      sch["fc1"]:shard("weight", 0):shard("bias", 0)
      sch["fc2"]:shard("weight", 1)
      sch["fc1"]:replace(slapo.op.LinearWithSync(sch["fc1"].mod, { mode = "column" }))
      sch["fc2"]:replace(slapo.op.LinearWithSync(sch["fc2"].mod, { mode = "row" }))
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)

  it("refuses an unknown mode", function()
    eq('op.LinearWithSync: mode must be "column" or "row", got diagonal',
      pcall_err(slapo.op.LinearWithSync, slapo.nn.Linear(4, 4), { mode = "diagonal" }))
  end)
end)

describe("tied parameters", function()
  local function tied_gpt2()
    slapo.manual_seed(3)
    return slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2, vocab_size = 32, n_positions = 16 })
  end

  it("are sharded once: the tie's second shard along the same axis records the split, not a second one", function()
    local sch = slapo.create_schedule(tied_gpt2())
    sch["transformer.wte"]:shard("weight", 0)
    eq({ 32, 16 }, sch["lm_head"]:param_info("weight").full_shape, "the untouched tie reports the full shape")
    sch["lm_head"]:shard("weight", 0)
    eq({ 32 / world, 16 }, sch.mod.lm_head.weight:size())
    eq({ 32, 16 }, sch["lm_head"]:param_info("weight").full_shape)
    eq(0, sch["lm_head"]:param_info("weight").shard_axis)
  end)

  it("refuse another axis than their tie's, naming the tie", function()
    local sch = slapo.create_schedule(tied_gpt2())
    sch["transformer.wte"]:shard("weight", 0)
    matches("shard: 'weight' of 'lm_head' is tied to 'transformer.wte.weight', already sharded along axis 0",
      pcall_err(function() sch["lm_head"]:shard("weight", 1) end))
    eq({ 32 / world, 16 }, sch.mod.lm_head.weight:size(), "the failed shard changed nothing")
  end)
end)

describe("training checkpoints under tensor parallelism", function()
  it("resume TP = 2 with dropout bit-exactly: the fork_rng streams travel with the checkpoint", function()
    local dir = "/tmp/slapo-tp-resume-" .. os.getenv("MASTER_PORT")
    slapo.manual_seed(2)
    local ids = slapo.randint(0, 64, { 2, 8 })
    local function model()
      slapo.manual_seed(21)
      local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64,
        n_positions = 16, resid_pdrop = 0.2, attn_pdrop = 0.2, embd_pdrop = 0.2 }))
      require("slapo.schedules.gpt2").schedule(sch, {})  -- fork_rng: each rank's own dropout stream
      assert(next(sch.mod:rng_states()), "the schedule gives modules streams of their own")
      return sch.mod
    end
    local function train(checkpoint_dir, stop_at)
      return slapo.train({ model = model(), steps = 4, lr = 1e-2, schedule = "constant", seed = 7, quiet = true,
        group = slapo.dist.world(), data = function() return ids end, checkpoint_dir = checkpoint_dir,
        checkpoint_every = checkpoint_dir and 1 or 0,
        on_step = function(step) if step == stop_at then error("stopped at step " .. step, 0) end end })
    end
    local whole = train(false)
    matches("stopped at step 3", pcall_err(train, dir, 3))
    local resumed = train(dir)
    eq(3, resumed.first_step)
    for step = 3, 4 do
      eq(whole.losses[step], resumed.losses[step], "step " .. step .. " after resuming at step 3")
    end
    slapo.dist.barrier()
    if slapo.dist.rank() == 0 then
      os.execute("rm -rf " .. dir)
    end
  end)
end)
