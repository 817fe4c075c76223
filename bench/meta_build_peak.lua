-- One row of bench/meta_build_peak: a GPT-2 made on the meta device, fully sharded per block and
-- at the root, then slapo.build; the most tensor memory the build held at once on this rank.
--   build/slapo-lua run --nproc N bench/meta_build_peak.lua
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
local cfg = { n_embd = 256, n_layer = 12, n_head = 4, vocab_size = 8192, n_positions = 64 }
local sch = slapo.create_schedule(slapo.models.gpt2(cfg, { device = "meta" }))
for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard() end
sch:fully_shard()
local seconds = slapo.clock()
local peak = slapo.peak_tensor_mib(function() slapo.build(sch) end)
seconds = slapo.clock() - seconds
local whole = slapo.models.gpt2(cfg, { device = "meta" }):num_params() * 4 / 2 ^ 20
local largest = cfg.vocab_size * cfg.n_embd * 4 / 2 ^ 20
print(("| %d | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |"):format(world, rank, whole, whole / world, largest, peak,
  peak / (whole / world + largest), seconds))
