-- A TinyLlama-1.1B-shaped LLaMA (22 layers, width 2048, 1.1 B parameters) trained fully sharded on
-- 2 ranks of one machine: random weights written once by slapo.save, loaded sliced (each rank
-- reads its half of every tensor), every layer checkpointed and fully_shard'ed and the root
-- fully_shard'ed, 3 AdamW steps of batch 1 x 256. Plain data parallelism would hold 16 bytes a parameter per rank (weights,
-- gradients, AdamW's two moments: 17.6 GB); each rank here holds half of that plus the layers it
-- gathers. Rank 0 then computes the step-1 loss of the same weights on one rank, for comparison.
--   slapo-lua run --nproc 2 bench/fully_sharded_tinyllama.lua [checkpoint dir, default /tmp/slapo-tinyllama]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local rank, world = slapo.dist.rank(), slapo.dist.world_size()
local dir = arg[1] or "/tmp/slapo-tinyllama"
local gib = 1024

local started = slapo.clock()
local function say(fmt, ...)
  if rank == 0 then
    print(("[%6.1f s] " .. fmt):format(slapo.clock() - started, ...))
    io.stdout:flush()
  end
end

-- 1. the checkpoint, written once (rank 0), kept for later runs
if rank == 0 and not io.open(dir .. "/model.safetensors") then
  say("writing random TinyLlama-1.1B weights to %s (4.4 GB)", dir)
  slapo.manual_seed(0)
  local model = slapo.models.llama("TinyLlama-1.1B")
  slapo.save(model, dir)
  model = nil
  collectgarbage()
  collectgarbage()
end
slapo.dist.barrier()

slapo.manual_seed(1)
local ids = slapo.randint(0, 32000, { 1, 256 })

-- 2. sliced loading under fully_shard
local sch = slapo.create_schedule(slapo.models.from_pretrained(dir, { device = "meta" }))
for _, layer in ipairs(sch["model.layers"]:children()) do
  layer:checkpoint()  -- activations of 22 layers would cost more than the sharded state saves
  layer:fully_shard()
end
sch:fully_shard()
local load_start = slapo.clock()
local model = slapo.build(sch)
local load_s = slapo.clock() - load_start
local after_load = timing.peak_memory_mib()
local held = 0
for _, p in ipairs(model:parameters()) do held = held + p:numel() end
say("loaded %.0f M parameters a rank (1/%d of the model) in %.1f s; peak resident %.2f GiB", held / 1e6, world,
  load_s, after_load / gib)

-- 3. three steps
local result = slapo.train({ model = model, steps = 3, lr = 1e-5, schedule = "constant", quiet = rank ~= 0,
  data = function() return ids end })
local peak = timing.peak_memory_mib()
local peaks = slapo.tensor({ peak }, { dtype = "float64" })
local all = slapo.dist.all_gather(peaks, 0):tolist()
model, sch, result.model = nil, nil, nil
collectgarbage()
collectgarbage()

-- 4. the one-rank loss of step 1, from the whole model (rank 0, after the sharded run is freed)
local reference
if rank == 0 then
  say("one rank: loading the whole model for the step-1 reference loss")
  local whole = slapo.models.from_pretrained(dir)
  reference = whole(ids, { labels = ids }):item()
end
slapo.dist.barrier()

if rank == 0 then
  local whole_params = held * world
  print()
  print("| | per rank |")
  print("|---|---|")
  print(("| parameters held (of %.2f B) | %.0f M (1/%d) |"):format(whole_params / 1e9, held / 1e6, world))
  print(("| plain DP's model state (16 B a parameter) | %.1f GiB |"):format(16 * whole_params / 2 ^ 30))
  print(("| fully sharded model state (16 B a held parameter) | %.1f GiB |"):format(16 * held / 2 ^ 30))
  for r, p in ipairs(all) do
    print(("| peak resident, rank %d (loading and 3 steps) | %.2f GiB |"):format(r - 1, p / gib))
  end
  print(("| peak resident after sliced loading, rank 0 | %.2f GiB |"):format(after_load / gib))
  print(("| step time (median of 3) | %.1f s |"):format(result.step_s or 0))
  print(("| step-1 loss: fully sharded %.6f, one rank %.6f | difference %.2g |"):format(result.losses[1], reference,
    math.abs(result.losses[1] - reference)))
end
