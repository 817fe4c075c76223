-- Collectives on the tensors of slapo.dist.device(): CPU under Gloo (CI, 2 ranks), cuda:LOCAL_RANK
-- with NCCL (scripts/device-check runs this file with SLAPO_DIST_BACKEND=nccl, on as many ranks
-- as the machine has GPUs, one GPU still running NCCL's own path; and under auto, Gloo and NCCL
-- side by side, with 2 ranks where there are 2 GPUs). Any world size.
local rank, world = slapo.dist.rank(), slapo.dist.world_size()
local device = slapo.dist.device()

local function on_device(t)
  eq(device, t:device())
  return t
end

describe("collectives on " .. device, function()
  it("uses this rank's GPU where the world has NCCL, else the CPU", function()
    local backend = os.getenv("SLAPO_DIST_BACKEND") or "auto"
    local local_rank = tonumber(os.getenv("LOCAL_RANK") or rank)
    -- auto takes NCCL when every rank has its own GPU (a world of one needs no communication): all
    -- ranks agree, so with fewer GPUs than ranks even the ranks that have one stay on the CPU
    local local_world = tonumber(os.getenv("LOCAL_WORLD_SIZE") or world)
    local nccl = backend == "nccl" or (backend == "auto" and world > 1 and slapo.cuda.device_count() >= local_world)
    eq(nccl and ("cuda:" .. local_rank) or "cpu", device)
  end)

  it("all_reduce, all_gather, broadcast and reduce_scatter", function()
    local t = on_device((slapo.ones({ 3 }) * (rank + 1)):to(device))
    slapo.dist.all_reduce(t)
    eq(3 * world * (world + 1) / 2, on_device(t):sum():item())

    local g = slapo.dist.all_gather((slapo.ones({ 2, 1 }) * rank):to(device), 1)
    eq({ 2, world }, on_device(g):size())
    for r = 0, world - 1 do
      eq(2 * r, g:narrow(1, r, 1):sum():item())
    end

    local b = (slapo.ones({ 4 }) * (rank + 10)):to(device)
    slapo.dist.broadcast(b, world - 1)
    eq(4 * (world - 1 + 10), on_device(b):sum():item())

    local part = slapo.dist.reduce_scatter(slapo.arange(2 * world):float():to(device), 0)
    eq({ world * 2 * rank, world * (2 * rank + 1) }, on_device(part):tolist())
  end)

  it("reduces, gathers and broadcasts CPU tensors under either backend (staged through the device)", function()
    local t = slapo.ones({ 2, 3 }):transpose(0, 1) * (rank + 1)  -- not contiguous either
    slapo.dist.all_reduce(t)
    eq("cpu", t:device())
    eq(6 * world * (world + 1) / 2, t:sum():item())
    local g = slapo.dist.all_gather(slapo.ones({ 1 }) * rank, 0)
    eq("cpu", g:device())
    eq(world * (world - 1) / 2, g:sum():item())
    local b = slapo.ones({ 2 }) * rank
    slapo.dist.broadcast(b, 0)
    eq({ 0, 0 }, b:tolist())
  end)

  it("reduces CUDA tensors through NCCL, or staged through Gloo's CPU buffers", function()
    if not slapo.cuda.is_available() then
      skip("no GPU: CUDA tensors in collectives")
    end
    local gpu = "cuda:" .. (tonumber(os.getenv("LOCAL_RANK") or rank) % slapo.cuda.device_count())
    local t = (slapo.ones({ 4 }) * (rank + 1)):to(gpu)
    slapo.dist.all_reduce(t)
    eq(gpu, t:device())
    eq(4 * world * (world + 1) / 2, t:sum():item())
    local g = slapo.dist.all_gather((slapo.ones({ 1 }) * rank):to(gpu), 0)
    eq(gpu, g:device())
    eq(world * (world - 1) / 2, g:sum():item())
  end)

  it("Megatron's f and g: identity forward, all-reduce backward, and the reverse", function()
    local x = (slapo.ones({ 2, 3 }) * (rank + 1)):to(device):detach()
    x:requires_grad(true)
    local y = slapo.dist.autograd.copy_to(x)  -- f
    eq(x:sum():item(), on_device(y):sum():item())
    y:sum():backward()
    eq(6 * world, x.grad:sum():item())

    local z = (slapo.ones({ 2, 3 }) * (rank + 1)):to(device):detach()
    z:requires_grad(true)
    local s = slapo.dist.autograd.reduce_from(z)  -- g
    eq(6 * world * (world + 1) / 2, on_device(s):sum():item())
    s:sum():backward()
    eq(6, z.grad:sum():item())
  end)

  it("bucketed data parallelism averages the gradients of each rank's batch", function()
    slapo.manual_seed(13)
    local m = slapo.models.mlp({ hidden_size = 16, intermediate_size = 36, hidden_act = "gelu" })
    m:to(device)
    local dp = slapo.dist.data_parallel(m, { bucket_mb = 0.001 })
    slapo.manual_seed(100 + rank)
    local x = slapo.randn({ 4, 16 }):to(device)
    slapo.F.mse_loss(m(x), x):backward()
    dp:finish()
    for _, p in ipairs(m:parameters()) do
      on_device(p.grad)
      -- every rank holds the same average: its sum over ranks is world times its own
      local total = p.grad:clone()
      slapo.dist.all_reduce(total)
      close((p.grad * world):to("cpu"), total:to("cpu"), { rtol = 1e-5, atol = 1e-6 })
    end
  end)
end)
