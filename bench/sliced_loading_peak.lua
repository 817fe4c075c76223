-- Peak resident memory while loading a TinyLlama-1.1B-shaped checkpoint sliced, on 2 ranks, under
-- one layout (arg[1]): "tp" (LLaMA's reference tensor parallelism), "fully" (every layer and the
-- root fully sharded) or "pipeline" (2 stages, cut after layer 10; the first trace reads each
-- stage's layers). The issue's bound: at most 1.2 x the rank's share plus the largest single
-- tensor. One layout a process, as the kernel's high-water mark (VmHWM) only grows; the
-- bench/sliced_loading_peak script runs all three.
--   slapo-lua run --nproc 2 bench/sliced_loading_peak.lua LAYOUT [checkpoint dir, default /tmp/slapo-tinyllama]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local layout_name, dir = arg[1], arg[2] or "/tmp/slapo-tinyllama"
local rank = slapo.dist.rank()
assert(slapo.dist.world_size() == 2, "run on 2 ranks: slapo-lua run --nproc 2 bench/sliced_loading_peak.lua " .. layout_name)
local mib = 2 ^ 20

-- the checkpoint, written once (rank 0) and kept for later runs, as bench/fully_sharded_tinyllama.lua's
if rank == 0 and not io.open(dir .. "/model.safetensors") then
  print(("writing random TinyLlama-1.1B weights to %s (4.4 GB)"):format(dir))
  slapo.manual_seed(0)
  slapo.save(slapo.models.llama("TinyLlama-1.1B"), dir)
  collectgarbage()
  collectgarbage()
end
slapo.dist.barrier()

local before = timing.peak_memory_mib()
local sch = slapo.create_schedule(slapo.models.from_pretrained(dir, { device = "meta" }))
local largest = 0  -- the largest single tensor, in MiB
for _, p in ipairs(sch.mod:parameters()) do largest = math.max(largest, p:numel() * 4 / mib) end
local start, params = slapo.clock(), nil
if layout_name == "tp" then
  require("slapo.schedules.llama").schedule(sch)
  params = slapo.build(sch):parameters()
elseif layout_name == "fully" then
  for _, layer in ipairs(sch["model.layers"]:children()) do layer:fully_shard() end
  sch:fully_shard()
  params = slapo.build(sch):parameters()
elseif layout_name == "pipeline" then
  sch["model.layers.10"]:cut_pipeline_stage()
  local pipe = slapo.build(sch, { pipeline = { group = slapo.dist.world(), micro_batches = 1 } })
  pipe:prepare(slapo.randint(0, 32000, { 1, 8 }))  -- the trace names the stage; its layers are read
  params = pipe:parameters()
else
  error("layout: tp, fully or pipeline")
end
local load_s = slapo.clock() - start
local share = 0  -- what this rank keeps, in MiB
for _, p in ipairs(params) do share = share + p:numel() * 4 / mib end
local peak = timing.peak_memory_mib()
local row = slapo.tensor({ share, peak, before, load_s }, { dtype = "float64" })
local all = slapo.dist.all_gather(row, 0):tolist()  -- rank 0's four numbers, then rank 1's
if rank == 0 then
  for r = 1, #all / 4 do
    local kept, high, base, secs = unpack(all, 4 * r - 3, 4 * r)
    local bound = 1.2 * kept + largest
    print(("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %s | %.1f |"):format(layout_name, r - 1, kept, largest,
      base, high, bound, (high - base) / kept, high <= bound and "yes" or "**no**", secs))
  end
end
