-- slapo-lua plan: Mixtral-8x7B-v0.1 on 8 x 8 NVIDIA H100 80GB HBM3, batch 256 x seq 4096
-- Run it: slapo-lua run --nproc 64 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 1 x dp 64, ep 4, checkpoint, zero-2                              2.7424 s   56.11 GiB  chosen
--   tp 2 x dp 8 x pp 4 (6+8+9+9), ep 4, 32 micro                        2.7437 s   71.13 GiB  0% slower
--   tp 1 x dp 64, ep 8, checkpoint, zero-2                              2.7463 s   44.95 GiB  0% slower
--   tp 1 x dp 64, ep 8, checkpoint, fully sharded                       2.7658 s   33.63 GiB  1% slower
--   tp 1 x dp 64, ep 8, 2 micro, checkpoint, zero-2                     2.7684 s   34.51 GiB  1% slower
--   tp 1 x dp 64, ep 4, checkpoint, fully sharded                       2.7690 s   34.95 GiB  1% slower
--   tp 1 x dp 64, ep 8, 2 micro, checkpoint, fully sharded              2.8073 s   23.19 GiB  2% slower
--   tp 4 x dp 4 x pp 4 (8+8+8+8), ep 2, 64 micro                        2.8238 s   58.24 GiB  3% slower
--   tp 4 x dp 2 x pp 8 (4+4+4+4+4+4+4+4), 128 micro, zero-1             2.8330 s   49.32 GiB  3% slower
--   tp 4 x dp 2 x pp 8 (4+4+4+4+4+4+4+4), 128 micro                     2.8367 s   57.61 GiB  3% slower
--   tp 4 x dp 2 x pp 8 (4+4+4+4+4+4+4+4), ep 2, 128 micro               2.8660 s   47.11 GiB  5% slower
--   tp 2 x dp 32, ep 2, checkpoint, zero-2                              2.9665 s   59.35 GiB  8% slower
--   tp 4 x dp 4 x pp 4 (8+8+8+8), 64 micro, zero-1                      2.9752 s   54.64 GiB  8% slower
--   tp 2 x dp 32, ep 2, checkpoint, fully sharded                       2.9864 s   39.61 GiB  9% slower
--   tp 4 x dp 1 x pp 16 (2+2+2+2+2+2+2+2+2+2+2+2+2+2+2+2), 256 micro    3.0086 s   46.80 GiB  10% slower
--   tp 2 x dp 32, ep 4, checkpoint, zero-2                              3.0095 s   48.19 GiB  10% slower
--   tp 1 x dp 64, ep 4, 2 micro, checkpoint, zero-2                     3.0150 s   45.66 GiB  10% slower
--   tp 2 x dp 32, ep 4, checkpoint, fully sharded                       3.0223 s   38.29 GiB  10% slower
--   tp 4 x dp 2 x pp 8 (4+4+4+4+4+4+4+4), 128 micro, zero-2             3.0324 s   49.50 GiB  11% slower
--   tp 2 x dp 32, ep 4, 2 micro, checkpoint, zero-2                     3.0408 s   35.28 GiB  11% slower
--   ... and 1715 more

local plan = {
  model = "Mixtral-8x7B-v0.1",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 1,           -- tensor parallel ranks (Megatron layout from slapo.schedules.mixtral)
  dp = 64,           -- data parallel replicas
  ep = 4,           -- expert parallelism: each layer's experts spread over ep replicas (shard_experts), tokens sent to them and back
  checkpoint = 1.0,  -- fraction of layers whose activations are recomputed in backward
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = true,  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = false,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  micro_batches = 1,  -- each replica's batch in this many parts, their gradients accumulated
  sequence = false,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 256, seq = 4096, steps = 2, lr = 1e-4,
  dtype = "bfloat16",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

-- `slapo-lua tune plan.lua --nproc 64` runs the plans above as knobs, the best predicted first
-- (a plain run keeps the table's values).
local function knob(name, choices, default)
  for _, c in ipairs(choices) do
    if c == default then
      return slapo.knob(name, choices, default)
    end
  end
  table.insert(choices, default)  -- an edited table: its value is a choice too
  return slapo.knob(name, choices, default)
end
local devices = plan.tp * plan.dp
plan.tp = knob("tp", { 1, 2, 4, 8 }, plan.tp)
plan.dp = math.floor(devices / plan.tp)
plan.checkpoint = knob("checkpoint", { 0.0, 1.0 }, plan.checkpoint)
plan.zero = knob("zero", { false, true }, plan.zero)
plan.fully_shard = knob("fully_shard", { false, true }, plan.fully_shard)
plan.reshard_after_forward = knob("reshard_after_forward", { true, false }, plan.reshard_after_forward)
assert(not (plan.zero and plan.fully_shard), "plan: zero (ZeRO-1) and fully_shard (ZeRO-3) are one or the other")
plan.ep = knob("ep", { 1, 2, 4, 8 }, plan.ep)
plan.micro_batches = knob("micro_batches", { 1, 2, 4, 8, 16, 32 }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / plan.dp / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * plan.dp * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))
slapo.predict({
  { tp = 1, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.74243, peak_gib = 56.1 },
  { tp = 1, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.74633, peak_gib = 45 },
  { tp = 1, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 2.7658, peak_gib = 33.6 },
  { tp = 1, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.76836, peak_gib = 34.5 },
  { tp = 1, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 2.76902, peak_gib = 34.9 },
  { tp = 1, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 2.8073, peak_gib = 23.2 },
  { tp = 2, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.96652, peak_gib = 59.4 },
  { tp = 2, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 2.98639, peak_gib = 39.6 },
  { tp = 2, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.00953, peak_gib = 48.2 },
  { tp = 1, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.01504, peak_gib = 45.7 },
  { tp = 2, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.02228, peak_gib = 38.3 },
  { tp = 2, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.04079, peak_gib = 35.3 },
  { tp = 2, ep = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.05605, peak_gib = 42.2 },
  { tp = 1, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.06208, peak_gib = 37.6 },
  { tp = 2, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.06629, peak_gib = 25.4 },
  { tp = 2, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.13473, peak_gib = 46.4 },
  { tp = 1, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.19102, peak_gib = 29.3 },
  { tp = 4, ep = 2, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.1978, peak_gib = 66.3 },
  { tp = 2, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.21195, peak_gib = 26.7 },
  { tp = 4, ep = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.21568, peak_gib = 68.4 },
  { tp = 2, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.22591, peak_gib = 28.8 },
  { tp = 4, ep = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.23219, peak_gib = 49.3 },
  { tp = 1, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.2602, peak_gib = 24.5 },
  { tp = 1, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.34693, peak_gib = 40.6 },
  { tp = 2, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.35605, peak_gib = 18.9 },
  { tp = 4, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.35984, peak_gib = 50.5 },
  { tp = 4, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.39286, peak_gib = 31.5 },
  { tp = 4, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.41993, peak_gib = 57.2 },
  { tp = 4, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.42932, peak_gib = 48 },
  { tp = 4, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.45407, peak_gib = 39.4 },
  { tp = 4, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.47284, peak_gib = 30.2 },
  { tp = 1, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.47411, peak_gib = 45.8 },
  { tp = 2, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.47973, peak_gib = 38.7 },
  { tp = 1, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.49102, peak_gib = 56.3 },
  { tp = 2, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.57868, peak_gib = 35.5 },
  { tp = 4, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 3.58601, peak_gib = 30.4 },
  { tp = 4, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.62356, peak_gib = 21.3 },
  { tp = 1, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.6285, peak_gib = 18 },
  { tp = 2, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.67039, peak_gib = 58.1 },
  { tp = 2, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.67615, peak_gib = 45.2 },
  { tp = 4, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.8958, peak_gib = 39.6 },
  { tp = 1, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.98167, peak_gib = 66.8 },
  { tp = 1, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.98871, peak_gib = 61.6 },
  { tp = 4, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 3.99763, peak_gib = 35.2 },
  { tp = 2, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.01009, peak_gib = 68.7 },
  { tp = 1, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.02875, peak_gib = 68 },
  { tp = 4, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.03887, peak_gib = 66.4 },
  { tp = 4, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.05423, peak_gib = 48.6 },
  { tp = 8, ep = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 4.07472, peak_gib = 67.7 },
  { tp = 2, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.10643, peak_gib = 66.2 },
  { tp = 8, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.14291, peak_gib = 48.8 },
  { tp = 4, ep = 2, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.15317, peak_gib = 32.9 },
  { tp = 2, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.15649, peak_gib = 59.7 },
  { tp = 8, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 4.15832, peak_gib = 40 },
  { tp = 2, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.16144, peak_gib = 40 },
  { tp = 2, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.19811, peak_gib = 56.5 },
  { tp = 1, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.28886, peak_gib = 40.4 },
  { tp = 8, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.32976, peak_gib = 35 },
  { tp = 4, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.33383, peak_gib = 69.6 },
  { tp = 2, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.34465, peak_gib = 25.6 },
  { tp = 8, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 4.36059, peak_gib = 26.1 },
  { tp = 4, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.38332, peak_gib = 41.6 },
  { tp = 4, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.443, peak_gib = 60.6 },
  { tp = 4, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.52975, peak_gib = 56.2 },
  { tp = 4, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.59337, peak_gib = 26 },
  { tp = 2, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.64409, peak_gib = 42.6 },
  { tp = 2, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 4.65328, peak_gib = 37.6 },
  { tp = 2, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.67782, peak_gib = 29.7 },
  { tp = 2, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 4.69619, peak_gib = 24.7 },
  { tp = 8, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.714, peak_gib = 43.8 },
  { tp = 8, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.72548, peak_gib = 57.7 },
  { tp = 2, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 4.7265, peak_gib = 23.2 },
  { tp = 4, ep = 4, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.75808, peak_gib = 55.8 },
  { tp = 2, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 4.76324, peak_gib = 18.3 },
  { tp = 4, ep = 1, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.76976, peak_gib = 53.9 },
  { tp = 2, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 4.80324, peak_gib = 57.3 },
  { tp = 2, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.89189, peak_gib = 25 },
  { tp = 2, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 4.90044, peak_gib = 67 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 4.90754, peak_gib = 62.7 },
  { tp = 2, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 4.91237, peak_gib = 60.5 },
  { tp = 8, ep = 1, micro_batches = 32, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.91386, peak_gib = 51.5 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.94071, peak_gib = 50.6 },
  { tp = 2, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.97373, peak_gib = 47.6 },
  { tp = 2, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 4.98909, peak_gib = 34.7 },
  { tp = 2, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 5.00102, peak_gib = 28.2 },
  { tp = 2, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 5.04564, peak_gib = 20 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 5.05942, peak_gib = 48.8 },
  { tp = 8, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 5.22072, peak_gib = 36.9 },
  { tp = 2, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 5.24219, peak_gib = 15 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 5.36321, peak_gib = 47 },
  { tp = 8, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 5.63866, peak_gib = 28 },
  { tp = 8, ep = 1, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 5.68757, peak_gib = 33.4 },
  { tp = 1, ep = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 5.74024, peak_gib = 42.8 },
  { tp = 2, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 5.84151, peak_gib = 29.3 },
  { tp = 1, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 5.96411, peak_gib = 27.1 },
  { tp = 4, ep = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.01802, peak_gib = 51.6 },
  { tp = 2, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.03712, peak_gib = 20.2 },
  { tp = 4, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.09295, peak_gib = 22.6 },
  { tp = 4, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.23703, peak_gib = 16.8 },
  { tp = 2, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.27164, peak_gib = 15.7 },
  { tp = 4, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.27516, peak_gib = 51.6 },
  { tp = 4, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.28098, peak_gib = 47.4 },
  { tp = 4, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.30121, peak_gib = 33.8 },
  { tp = 4, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.31285, peak_gib = 29.5 },
  { tp = 1, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.33521, peak_gib = 19.3 },
  { tp = 4, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.3533, peak_gib = 24.9 },
  { tp = 4, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.37659, peak_gib = 20.6 },
  { tp = 4, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.38135, peak_gib = 52.5 },
  { tp = 8, ep = 2, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.38825, peak_gib = 62.6 },
  { tp = 4, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.45759, peak_gib = 24.7 },
  { tp = 4, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.46487, peak_gib = 20.4 },
  { tp = 4, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.50104, peak_gib = 65.9 },
  { tp = 4, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.51146, peak_gib = 16.1 },
  { tp = 4, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.52984, peak_gib = 57 },
  { tp = 4, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.56287, peak_gib = 55.9 },
  { tp = 4, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.57727, peak_gib = 38.1 },
  { tp = 4, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.58653, peak_gib = 50.3 },
  { tp = 4, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.60607, peak_gib = 29.1 },
  { tp = 4, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.66277, peak_gib = 22.4 },
  { tp = 8, ep = 1, micro_batches = 32, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.68799, peak_gib = 31.7 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.72178, peak_gib = 66.6 },
  { tp = 4, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.79179, peak_gib = 48.9 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.79181, peak_gib = 41 },
  { tp = 4, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.79583, peak_gib = 47 },
  { tp = 8, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.81509, peak_gib = 19.2 },
  { tp = 4, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.81907, peak_gib = 31 },
  { tp = 4, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.82716, peak_gib = 29.2 },
  { tp = 4, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.87364, peak_gib = 22.1 },
  { tp = 4, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.88072, peak_gib = 62.7 },
  { tp = 4, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.88981, peak_gib = 20.3 },
  { tp = 4, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.89992, peak_gib = 44.9 },
  { tp = 4, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.9139, peak_gib = 50.7 },
  { tp = 4, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.9331, peak_gib = 32.8 },
  { tp = 4, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.93832, peak_gib = 36 },
  { tp = 4, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 6.96585, peak_gib = 17.6 },
  { tp = 4, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 6.9715, peak_gib = 23.9 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.99529, peak_gib = 29.3 },
  { tp = 4, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 6.99818, peak_gib = 15.8 },
  { tp = 4, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 6.99819, peak_gib = 31.5 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 7.02846, peak_gib = 17.2 },
  { tp = 4, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 7.03136, peak_gib = 19.4 },
  { tp = 8, ep = 2, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.05567, peak_gib = 58.6 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.14717, peak_gib = 15.4 },
  { tp = 4, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 7.21184, peak_gib = 13.6 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.26216, peak_gib = 55.8 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 7.2655, peak_gib = 67.1 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 7.29247, peak_gib = 57.3 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 7.29994, peak_gib = 54.4 },
  { tp = 4, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.53911, peak_gib = 18.2 },
  { tp = 4, ep = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 7.7063, peak_gib = 47.3 },
  { tp = 2, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.70716, peak_gib = 62.3 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 7.76526, peak_gib = 45.6 },
  { tp = 4, ep = 2, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.76812, peak_gib = 57.1 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 7.79222, peak_gib = 35.7 },
  { tp = 1, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.90128, peak_gib = 62.8 },
  { tp = 2, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.93612, peak_gib = 36.8 },
  { tp = 4, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.98485, peak_gib = 37.1 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 7.99921, peak_gib = 56.6 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.00464, peak_gib = 54.7 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.03042, peak_gib = 54.4 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.05394, peak_gib = 54.1 },
  { tp = 4, ep = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.11773, peak_gib = 23.7 },
  { tp = 8, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.1581, peak_gib = 71 },
  { tp = 8, ep = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.16224, peak_gib = 67.1 },
  { tp = 8, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.20191, peak_gib = 43.2 },
  { tp = 8, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.21019, peak_gib = 39.3 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.21128, peak_gib = 35.1 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.21671, peak_gib = 33.1 },
  { tp = 8, ep = 1, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.22187, peak_gib = 64.2 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.26738, peak_gib = 34.3 },
  { tp = 8, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.28952, peak_gib = 29.4 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.28955, peak_gib = 32.8 },
  { tp = 8, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.30609, peak_gib = 25.5 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.3366, peak_gib = 32.5 },
  { tp = 8, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.4208, peak_gib = 22.4 },
  { tp = 8, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.45394, peak_gib = 18.5 },
  { tp = 8, ep = 2, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.46038, peak_gib = 47.2 },
  { tp = 8, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.46139, peak_gib = 58.9 },
  { tp = 8, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.47104, peak_gib = 52 },
  { tp = 8, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.53142, peak_gib = 33.3 },
  { tp = 8, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.54106, peak_gib = 26.4 },
  { tp = 8, ep = 2, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.57328, peak_gib = 54.7 },
  { tp = 8, ep = 1, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.96779, peak_gib = 24.6 },
  { tp = 8, ep = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.003, peak_gib = 48.5 },
  { tp = 4, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.00523, peak_gib = 13.9 },
  { tp = 8, ep = 2, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.07303, peak_gib = 22.9 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.20274, peak_gib = 32.8 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.60406, peak_gib = 46.8 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.67409, peak_gib = 21.2 },
  { tp = 8, ep = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.6843, peak_gib = 19 },
  { tp = 8, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.2065, peak_gib = 68.2 },
  { tp = 8, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.2089, peak_gib = 66.7 },
  { tp = 8, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.2372, peak_gib = 40.5 },
  { tp = 8, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.2419, peak_gib = 39 },
  { tp = 8, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.2984, peak_gib = 26.6 },
  { tp = 8, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.3066, peak_gib = 51.7 },
  { tp = 8, ep = 4, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.3077, peak_gib = 69.6 },
  { tp = 8, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.3079, peak_gib = 25.1 },
  { tp = 8, ep = 4, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.3336, peak_gib = 41.9 },
  { tp = 8, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.3585, peak_gib = 37.9 },
  { tp = 8, ep = 4, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.3854, peak_gib = 28 },
  { tp = 8, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.421, peak_gib = 19.7 },
  { tp = 8, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.4399, peak_gib = 18.2 },
  { tp = 8, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4621, peak_gib = 31 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.471, peak_gib = 37.1 },
  { tp = 8, ep = 4, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.4891, peak_gib = 21.1 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.5167, peak_gib = 16.2 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.5201, peak_gib = 27.5 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.547, peak_gib = 17.6 },
  { tp = 8, ep = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.5545, peak_gib = 14.7 },
  { tp = 8, ep = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.5605, peak_gib = 15.1 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.2323, peak_gib = 25.8 },
  { tp = 8, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.2365, peak_gib = 66.7 },
  { tp = 8, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.238, peak_gib = 66.4 },
  { tp = 8, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.2494, peak_gib = 69 },
  { tp = 8, ep = 8, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.2548, peak_gib = 67 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.2593, peak_gib = 15.9 },
  { tp = 8, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.2663, peak_gib = 39 },
  { tp = 8, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.2693, peak_gib = 38.7 },
  { tp = 8, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.2763, peak_gib = 41.2 },
  { tp = 4, ep = 2, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.2808, peak_gib = 47.9 },
  { tp = 8, ep = 8, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.2817, peak_gib = 39.3 },
  { tp = 8, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.326, peak_gib = 25.1 },
  { tp = 8, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.33, peak_gib = 27.4 },
  { tp = 8, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.3318, peak_gib = 24.8 },
  { tp = 8, ep = 8, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.3355, peak_gib = 25.4 },
  { tp = 1, ep = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.378, peak_gib = 32.4 },
  { tp = 2, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.4072, peak_gib = 22.9 },
  { tp = 8, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.4376, peak_gib = 20.5 },
  { tp = 8, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.443, peak_gib = 18.5 },
  { tp = 8, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.4452, peak_gib = 18.2 },
  { tp = 8, ep = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.457, peak_gib = 17.9 },
  { tp = 8, ep = 1, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.5638, peak_gib = 55.4 },
  { tp = 4, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.5655, peak_gib = 18.1 },
  { tp = 4, ep = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.6304, peak_gib = 14.6 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.6356, peak_gib = 17 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.641, peak_gib = 15 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.6668, peak_gib = 14.7 },
  { tp = 2, ep = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.6875, peak_gib = 17 },
  { tp = 8, ep = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.6903, peak_gib = 14.4 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.7345, peak_gib = 14.5 },
  { tp = 1, ep = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.772, peak_gib = 21.9 },
  { tp = 8, ep = 4, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.9644, peak_gib = 13 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.966, peak_gib = 15.3 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.9714, peak_gib = 13.3 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.0443, peak_gib = 13 },
  { tp = 8, ep = 8, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.0913, peak_gib = 12.7 },
  { tp = 8, ep = 1, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.3098, peak_gib = 15.7 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.6479, peak_gib = 17.2 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.5063, peak_gib = 33.2 },
  { tp = 4, ep = 1, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 15.0255, peak_gib = 68.3 },
  { tp = 2, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 15.1421, peak_gib = 59.1 },
  { tp = 4, ep = 1, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 15.3551, peak_gib = 34.9 },
  { tp = 8, ep = 1, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 15.5522, peak_gib = 42.7 },
  { tp = 8, ep = 2, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 15.6831, peak_gib = 13.3 },
  { tp = 8, ep = 1, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 16.6209, peak_gib = 22.8 },
  { tp = 4, ep = 1, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 22.1869, peak_gib = 49.3 },
  { tp = 8, ep = 1, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 22.2362, peak_gib = 33.8 },
  { tp = 4, ep = 1, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 22.5165, peak_gib = 15.9 },
  { tp = 2, ep = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 22.5422, peak_gib = 19.6 },
  { tp = 1, ep = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 22.6571, peak_gib = 27.2 },
  { tp = 8, ep = 1, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 23.3049, peak_gib = 14 },
})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({ tp = plan.tp, ep = plan.ep })
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local vocab = slapo.models.config(model).vocab_size

-- each layer's tensor parallelism: the reference schedule's (Megatron's) layout; Megatron's layout prices tensor parallelism: the intra-op pass prices dense layers, and Mixtral-8x7B-v0.1's experts each run on the rows routed to them
local shard_layer = nil
local shard_layer_splits_tokens = false  -- it was written for sequence parallelism
if plan.tp > 1 and plan.sequence ~= (shard_layer ~= nil and shard_layer_splits_tokens) then
  error(("plan.sequence = %s, but the layers' layout (shard_layer) %s the tokens: plan again with the other, or set "
    .. "sequence = %s"):format(tostring(plan.sequence), plan.sequence and "keeps whole" or "splits",
    tostring(not plan.sequence)))
end
-- sequence parallelism: layers first..last take their tokens split over the tp ranks, and hand them on whole
local function sequence_parallel(layers, first, last)
  if not plan.sequence or plan.tp < 2 then return end
  layers[first]:sync("fwd_pre", "scatter", { axis = 1 })
  layers[last]:sync("fwd_post", "all_gather", { axis = 1 })
end

-- what the script is doing now, from rank 0 on stderr (checking a large model takes a while)
local function phase(text)
  if slapo.dist.rank() == 0 then io.stderr:write("plan: ", text, "\n") end
end

-- the schedule is checked against the unscheduled model (outputs and gradients) before training
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, { micro_batch, plan.seq })
phase("checking the schedule against the unscheduled model: outputs and gradients")
local report = slapo.verify(sch, { example }, {}, function(s)
  for _, note in ipairs(require("slapo.schedules.mixtral").schedule(s, { checkpoint = plan.checkpoint,
    layer = shard_layer, ep_group = plan.ep > 1 and layout.ep_group or nil })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  -- each layer, then the rest at the root (FSDP2's order)
  local options = { group = layout.dp_group, reshard_after_forward = plan.reshard_after_forward }
  for _, list in ipairs({ "model.layers" }) do
    local layers = s[list]:children()
    sequence_parallel(layers, 1, #layers)
    if plan.fully_shard and plan.dp > 1 then
      for _, layer in ipairs(layers) do
        if plan.dp > plan.ep then  -- each expert over the replicas holding it
          for _, expert in ipairs(layer["block_sparse_moe.experts"]:children()) do
            expert:fully_shard({ group = layout.expert_dp_group, reshard_after_forward = plan.reshard_after_forward })
          end
        end
        layer:fully_shard(options)
      end
    end
  end
  if plan.fully_shard and plan.dp > 1 then s:fully_shard(options) end
end)
if slapo.dist.rank() == 0 then
  print(("verify: %d output(s) and %d gradients match the unscheduled model"):format(report.outputs, report.gradients))
end
local built = slapo.build(sch)
collectgarbage()  -- the verified copies go before memory is measured
-- tensor memory per rank: the weights, and the most the steps held on top (gradients, AdamW, activations)
phase(("training %d steps"):format(plan.steps))
local peak_mib, result = slapo.peak_tensor_mib(slapo.train, {
  model = built, layout = layout, optimizer = plan.zero and "zero_adamw" or "adamw",
  data = { vocab = vocab, batch = micro_batch, seq = plan.seq }, grad_accum = plan.micro_batches,
  steps = plan.steps, lr = plan.lr, autocast = plan.dtype == "bfloat16" and "bf16" or nil,
})
local held = slapo.dist.all_gather(slapo.tensor({ built:num_params() * 4 / 2 ^ 20 + peak_mib })):tolist()
local fullest = math.max(unpack(held))
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f, %.4f s/step, %.0f MiB of tensors on the fullest rank"):format(plan.steps,
    result.final_loss, result.step_s or 0, fullest))
end
