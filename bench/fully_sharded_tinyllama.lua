-- A TinyLlama-1.1B-shaped LLaMA (22 layers, width 2048, 1.1 B parameters) trained fully sharded on
-- 2 ranks of one machine: random weights written once by slapo.save, loaded sliced (each rank
-- reads its half of every tensor), fully_shard'ed as torchtitan lays out a LLaMA (the embedding,
-- each layer, the LM head kept whole from forward to backward, the root for the final norm), every
-- layer checkpointed unless asked not to, 3 AdamW steps of batch 1 x 256. Plain data parallelism
-- would hold 16 bytes a parameter per rank (weights, gradients, AdamW's two moments: 17.6 GB); each
-- rank here holds half of that plus what it gathers. The table accounts for each rank's peak. Rank
-- 0 then computes the step-1 loss of the same weights on one rank, for comparison.
--   slapo-lua run --nproc 2 bench/fully_sharded_tinyllama.lua [checkpoint dir] [checkpoint | no-checkpoint]
--   (defaults: /tmp/slapo-tinyllama, checkpoint)
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local rank, world = slapo.dist.rank(), slapo.dist.world_size()
local dir = arg[1] or "/tmp/slapo-tinyllama"
local checkpointed = (arg[2] or "checkpoint") == "checkpoint"
assert(checkpointed or arg[2] == "no-checkpoint", "fully_sharded_tinyllama: the second argument is checkpoint or no-checkpoint")
local gib = 1024
local process_mib = slapo.memory_mib()  -- before any model: libraries, Lua, the process group

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
sch["model.embed_tokens"]:fully_shard()
for _, layer in ipairs(sch["model.layers"]:children()) do
  if checkpointed then layer:checkpoint() end
  layer:fully_shard()
end
sch["lm_head"]:fully_shard({ reshard_after_forward = false })  -- backward starts with it
-- the root's backward prefetch would gather the embedding at the start of backward (2026-11-29: held to
-- its end, though backward never reads it; to trace)
sch:fully_shard({ prefetch = os.getenv("ROOT_PREFETCH") == "1" })
local load_start = slapo.clock()
local model = slapo.build(sch)
local load_s = slapo.clock() - load_start
local after_load = timing.peak_memory_mib()
local held = 0
for _, p in ipairs(model:parameters()) do held = held + p:numel() end
say("loaded %.0f M parameters a rank (1/%d of the model) in %.1f s; peak resident %.2f GiB", held / 1e6, world,
  load_s, after_load / gib)

-- 3. three steps
local tensors, result = slapo.tensor_peak(slapo.train, { model = model, steps = 3, lr = 1e-5, schedule = "constant",
  quiet = rank ~= 0, data = function() return ids end })
local peak = timing.peak_memory_mib()
-- each rank's peak, its parts: counted (state) and measured (the ledger, the meter, the process)
local state_mib = 16 * held / 2 ^ 20
local tensor_peak_mib = 4 * held / 2 ^ 20 + tensors.mib  -- the weights were there before the meter started
local parts = { peak, process_mib, state_mib, tensors.gathered_mib, tensors.reducing_mib,
  tensor_peak_mib - state_mib - tensors.gathered_mib - tensors.reducing_mib, peak - process_mib - tensor_peak_mib,
  after_load }
local gathered = slapo.dist.all_gather(slapo.tensor(parts, { dtype = "float64" }), 0):tolist()
local all = {}  -- by rank, its parts
for r = 1, world do all[r] = { unpack(gathered, (r - 1) * #parts + 1, r * #parts) } end
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
  print(("layers %s; parameters held %.0f M of %.2f B (1/%d); plain DP's model state %.1f GiB a rank"):format(
    checkpointed and "checkpointed" or "not checkpointed", held / 1e6, whole_params / 1e9, world,
    16 * whole_params / 2 ^ 30))
  print()
  local header, rule = "| GiB | ", "|---|"
  for r = 1, #all do header, rule = header .. ("rank %d | "):format(r - 1), rule .. "---|" end
  print(header)
  print(rule)
  local rows = { "peak resident (loading and 3 steps)", "  the process before the model (libraries, Lua, Gloo)",
    "  model state: weights, gradients, AdamW's moments (16 B a held parameter)",
    "  whole parameters gathered, at the tensor peak (the ledger)",
    "  gradients in reduce-scatters, at the tensor peak (the ledger)",
    "  activations and temporaries (the rest of the tensor peak)",
    "  the allocator's and the rest (peak resident - process - tensor peak)", "peak resident after sliced loading" }
  for i, label in ipairs(rows) do
    local line = "| " .. label .. " | "
    for r = 1, #all do line = line .. ("%.2f | "):format(all[r][i] / gib) end
    print(line)
  end
  print()
  print(("step time (median of 3) %.1f s"):format(result.step_s or 0))
  print(("step-1 loss: fully sharded %.6f, one rank %.6f, difference %.2g"):format(result.losses[1], reference,
    math.abs(result.losses[1] - reference)))
end
