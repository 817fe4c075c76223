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

describe("ZeRO-1's step in chunks, in place", function()
  local function model(hidden)
    slapo.manual_seed(13)
    return slapo.models.mlp({ hidden_size = hidden, intermediate_size = 4 * hidden, hidden_act = "gelu" })
  end

  it("equals plain AdamW with chunks smaller than a parameter, every rank its own batch", function()
    local world = slapo.dist.world_size()
    local one, dp = model(16), model(16)
    local adamw = slapo.optim.adamw(one, { lr = 1e-2, weight_decay = 0.1 })
    -- 1 KiB of every rank's slices at a time: 256 / world elements a rank, parameters of 1,024 cut across chunks
    local zero = slapo.optim.zero_adamw(dp, { lr = 1e-2, weight_decay = 0.1, chunk_mib = 1 / 1024 })
    slapo.manual_seed(2)
    local xs, y = {}, slapo.randn({ 4, 16 })
    for r = 1, world do xs[r] = slapo.randn({ 4, 16 }) end
    for _ = 1, 3 do
      adamw:zero_grad()
      local sum = slapo.F.mse_loss(one(xs[1]), y)
      for r = 2, world do sum = sum + slapo.F.mse_loss(one(xs[r]), y) end
      (sum / world):backward()
      adamw:step()
      zero:zero_grad()
      slapo.F.mse_loss(dp(xs[slapo.dist.rank() + 1]), y):backward()
      zero:step()
    end
    local theirs = dp:state_dict()
    for name, p in pairs(one:state_dict()) do close(p, theirs[name], { rtol = 1e-5, atol = 1e-6 }) end
  end)

  it("holds its chunk buffer at most in a step, nothing the size of the model", function()
    local m = model(256)  -- 2 MiB of weights and as much of gradients
    local zero = slapo.optim.zero_adamw(m, { lr = 1e-3, chunk_mib = 1 / 16 })  -- its moments made here
    slapo.manual_seed(3)
    local x = slapo.randn({ 4, 256 })
    slapo.F.mse_loss(m(x), x):backward()
    collectgarbage()
    local weights_mib = 4 * m:num_params() / 2 ^ 20
    local step_mib = slapo.peak_tensor_mib(function() zero:step() end)
    -- the 64 KiB chunk, the reduce-scatter's copy of it and this rank's part of it (and the flags)
    assert(step_mib < 0.2, ("the step held %.3f MiB above its start, for %.2f MiB of weights"):format(step_mib, weights_mib))
  end)
end)

describe("ZeRO-1 and parameters without a gradient", function()
  it("skips them as torch's AdamW does: no weight decay, no moments", function()
    local function model()
      slapo.manual_seed(5)
      return slapo.nn.Module({
        type = "HalfUsed",
        children = { used = slapo.nn.Linear(8, 8), unused = slapo.nn.Linear(8, 8) },
        forward = function(self, x)
          return self.used(x)
        end,
      })
    end
    local plain, sharded = model(), model()
    local before = plain.unused.weight:detach():clone()
    local adamw = slapo.optim.adamw(plain, { lr = 1e-2, weight_decay = 0.5 })
    local zero = slapo.optim.zero_adamw(sharded, { lr = 1e-2, weight_decay = 0.5 })
    slapo.manual_seed(1)
    local x = slapo.randn({ 4, 8 })
    for _ = 1, 3 do
      adamw:zero_grad()
      zero:zero_grad()
      local y = plain(x)
      local plain_loss = (y * y):mean()
      plain_loss:backward()
      local z = sharded(x)
      local sharded_loss = (z * z):mean()
      sharded_loss:backward()
      adamw:step()
      zero:step()
    end
    eq(true, before:equal(plain.unused.weight), "torch's AdamW leaves the unused weight as it was")
    local theirs = sharded:state_dict()
    for name, p in pairs(plain:state_dict()) do
      close(p, theirs[name], { rtol = 1e-5, atol = 1e-6 })
    end
    eq(true, before:equal(sharded.unused.weight), "zero_adamw leaves it too")
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

-- the one-rank reference the training cases compare with (tests/dist/one_rank_reference.lua), run
-- in this spec's environment so that its checks count as the case's
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()
local tiny_gpt2 = reference.tiny_gpt2

describe("train with zero_adamw on rows of each rank's own", function()
  it("clips the averaged gradient by its global norm and logs the global step, as one rank on all rows", function()
    local rank = slapo.dist.rank()
    local all, mine = reference.rows()
    local ref, ref_losses, ref_norms = reference.train(all, 3, 0.5)
    local path = "/tmp/slapo-zero-metrics-" .. os.getenv("MASTER_PORT")
    local result = slapo.train({ model = tiny_gpt2(), steps = 3, lr = 1e-2, schedule = "constant", clip = 0.5,
      quiet = true, optimizer = "zero_adamw", metrics = path, data = function() return mine end })
    reference.check(result, ref, ref_losses, ref_norms)
    if rank == 0 then  -- tokens/s counts every rank's rows
      for line in io.lines(path) do
        local record = slapo.json_decode(line)
        local tokens = record.tokens_per_s * record.seconds
        assert(math.abs(tokens - all:numel()) < 1e-4 * all:numel(), ("step %d: %.1f tokens, %d consumed"):format(
          record.step, tokens, all:numel()))
      end
      os.remove(path)
    end
  end)
end)

describe("hot swap under zero_adamw", function()
  it("carries the sharded moments: the swapped run follows the unswapped one", function()
    local path = "/tmp/slapo-zero-swap-" .. os.getenv("MASTER_PORT") .. ".lua"
    local function write(text) reference.write_shared(path, text) end
    slapo.manual_seed(2)
    local ids = slapo.randint(0, 64, { 2, 8 })
    local function train(edit)
      write("return function(sch) end\n")
      return slapo.train({ make_model = tiny_gpt2, schedule_file = path, steps = 5, lr = 1e-2, quiet = true,
        optimizer = "zero_adamw", data = function() return ids end,
        on_step = function(step) if step == 2 and edit then write(edit) end end })
    end
    local plain = train(nil)
    local swapped = train("return function(sch) sch['transformer.h.0']:checkpoint() end\n")
    matches("checkpoint%(%)", swapped.schedule:log())
    for step = 1, 5 do
      eq(plain.losses[step], swapped.losses[step], "step " .. step)
    end
    if slapo.dist.rank() == 0 then
      os.remove(path)
    end
  end)
end)
