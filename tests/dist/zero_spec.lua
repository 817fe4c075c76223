-- ZeRO-1 on 2 ranks or more: optimizer moments sharded across the data-parallel group, updates equal to
-- plain AdamW (after Slapo/DeepSpeed's equivalence checks).
describe("ZeRO-1", function()
  local function model()
    slapo.manual_seed(13)
    return slapo.models.mlp({ hidden_size = 16, intermediate_size = 36, hidden_act = "gelu" })
  end

  it("equals plain AdamW over several steps while holding half the state", function()
    local plain, sharded = model(), model()
    local adamw = slapo.optim.adamw(plain, { lr = 1e-2, weight_decay = 0.1 })
    local zero = slapo.optim.zero_adamw(sharded, { lr = 1e-2, weight_decay = 0.1 })
    local total = plain:num_params()
    eq(math.ceil(total / slapo.dist.world_size()), zero:shard_numel())
    slapo.manual_seed(1)  -- the same batch on every rank: the averaged gradient is the plain one
    local x, y = slapo.randn({ 8, 16 }), slapo.randn({ 8, 16 })
    for _ = 1, 4 do
      adamw:zero_grad()
      zero:zero_grad()
      slapo.F.mse_loss(plain(x), y):backward()
      slapo.F.mse_loss(sharded(x), y):backward()
      adamw:step()
      zero:step()
    end
    local theirs = sharded:state_dict()
    for name, p in pairs(plain:state_dict()) do
      close(p, theirs[name], { rtol = 1e-5, atol = 1e-6 })
    end
  end)

  it("averages different batches across ranks as data parallelism does", function()
    local one, dp = model(), model()
    local adamw = slapo.optim.adamw(one, { lr = 1e-2 })
    local zero = slapo.optim.zero_adamw(dp, { lr = 1e-2 })
    slapo.manual_seed(2)
    local world, xs, y = slapo.dist.world_size(), {}, slapo.randn({ 4, 16 })
    for r = 1, world do
      xs[r] = slapo.randn({ 4, 16 })
    end
    -- one rank on the mean of every rank's loss == each rank on its own batch, gradients averaged
    adamw:zero_grad()
    local sum = slapo.F.mse_loss(one(xs[1]), y)
    for r = 2, world do
      sum = sum + slapo.F.mse_loss(one(xs[r]), y)
    end
    (sum / world):backward()
    adamw:step()
    zero:zero_grad()
    slapo.F.mse_loss(dp(xs[slapo.dist.rank() + 1]), y):backward()
    zero:step()
    close(one.fc1.weight, dp.fc1.weight, { rtol = 1e-5, atol = 1e-6 })
  end)
end)

describe("train with zero_adamw", function()
  it("follows the plain AdamW loss curve", function()
    local function build()
      slapo.manual_seed(3)
      return slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16,
        resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
    end
    local ids = slapo.randint(0, 64, { 2, 8 })
    slapo.dist.broadcast(ids, 0)
    local plain = slapo.train({ model = build(), steps = 4, lr = 1e-2, quiet = true, data = function() return ids end })
    local zero = slapo.train({ model = build(), steps = 4, lr = 1e-2, quiet = true, optimizer = "zero_adamw",
      data = function() return ids end })
    for step = 1, 4 do
      assert(math.abs(plain.losses[step] - zero.losses[step]) < 1e-5 * plain.losses[step],
        ("step %d: %.7f vs %.7f"):format(step, plain.losses[step], zero.losses[step]))
    end
  end)
end)

describe("zero_adamw checkpoints", function()
  it("resume continues the same loss curve bit-exactly", function()
    local ids = slapo.randint(0, 64, { 2, 8 })
    slapo.dist.broadcast(ids, 0)
    local dir = "/tmp/slapo-zero-ckpt-" .. os.getenv("MASTER_PORT")
    local function run(steps, resume, out)
      slapo.manual_seed(3)
      local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16,
        resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
      return slapo.train({ model = model, steps = steps, lr = 1e-2, quiet = true, optimizer = "zero_adamw",
        checkpoint_dir = out, checkpoint_every = 3, resume = resume, data = function() return ids end })
    end
    local full = run(6, false, dir)
    local resumed = run(6, dir .. "/step-000003", dir .. "-copy")
    eq(4, resumed.first_step)
    for step = 4, 6 do
      eq(full.losses[step], resumed.losses[step], "step " .. step)
    end
    slapo.dist.barrier()
    if slapo.dist.rank() == 0 then
      os.execute("rm -rf " .. dir .. " " .. dir .. "-copy")
    end
  end)

  it("refuses state from another model", function()
    local small = slapo.models.mlp({ hidden_size = 8, intermediate_size = 16 })
    local big = slapo.models.mlp({ hidden_size = 16, intermediate_size = 32 })
    local state = slapo.optim.zero_adamw(small):state_tensors()
    matches("zero_adamw: the saved state covers %d+ parameters in slices of %d+, this optimizer %d+",
      pcall_err(function() slapo.optim.zero_adamw(big):load_state_tensors(state) end))
  end)
end)
