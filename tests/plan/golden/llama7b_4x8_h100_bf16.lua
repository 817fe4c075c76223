-- slapo-lua plan: llama-7b on 4 x 8 NVIDIA H100 80GB HBM3, batch 128 x seq 2048
-- Run it: slapo-lua run --nproc 32 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 2 x dp 16, 2 micro, sequence, zero-2                             0.7354 s   68.95 GiB  chosen
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, sequence, zero-1            0.7497 s   23.73 GiB  2% slower
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, sequence                    0.7550 s   35.60 GiB  3% slower
--   tp 1 x dp 8 x pp 4 (8+8+8+8), 16 micro, zero-1                      0.7613 s   37.46 GiB  4% slower
--   tp 1 x dp 8 x pp 4 (8+8+8+8), 16 micro                              0.7690 s   54.58 GiB  5% slower
--   tp 1 x dp 8 x pp 4 (8+8+8+8), 16 micro, zero-2                      0.7693 s   36.86 GiB  5% slower
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, zero-1                      0.7695 s   21.46 GiB  5% slower
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro                              0.7728 s   28.80 GiB  5% slower
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, sequence, zero-2            0.7734 s   23.02 GiB  5% slower
--   tp 1 x dp 8 x pp 4 (8+8+8+8), 16 micro, fully sharded               0.7824 s   34.98 GiB  6% slower
--   tp 2 x dp 2 x pp 8 (4+4+4+4+4+4+4+4), 64 micro, sequence, zero-1    0.7841 s   21.40 GiB  7% slower
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, zero-2                      0.7842 s   21.26 GiB  7% slower
--   tp 4 x dp 8, 2 micro, sequence, zero-2                              0.7851 s   69.44 GiB  7% slower
--   tp 2 x dp 2 x pp 8 (4+4+4+4+4+4+4+4), 64 micro, sequence            0.7860 s   25.54 GiB  7% slower
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, sequence, fully sharded     0.7919 s   21.76 GiB  8% slower
--   tp 4 x dp 8, 2 micro, sequence, fully sharded                       0.7936 s   66.89 GiB  8% slower
--   tp 4 x dp 2 x pp 4 (8+8+8+8), 64 micro, sequence, zero-1            0.7941 s   19.13 GiB  8% slower
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, fully sharded               0.7954 s   20.50 GiB  8% slower
--   tp 4 x dp 2 x pp 4 (8+8+8+8), 64 micro, sequence                    0.7973 s   26.11 GiB  8% slower
--   tp 1 x dp 4 x pp 8 (4+4+4+4+4+4+4+4), 32 micro, zero-1              0.8025 s   34.63 GiB  9% slower
--   ... and 1140 more
--   tp 2 x dp 4 x pp 4 (8+8+8+8), 32 micro, sequence, zero-1            0.7497 s   23.73 GiB  2% slower (a submesh per stage)

local plan = {
  model = "llama-7b",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 2,           -- tensor parallel ranks (Megatron layout from slapo.schedules.llama)
  dp = 16,           -- data parallel replicas
  checkpoint = 0.0,  -- fraction of layers whose activations are recomputed in backward
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = true,  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = false,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  micro_batches = 2,  -- each replica's batch in this many parts, their gradients accumulated
  sequence = true,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 128, seq = 2048, steps = 2, lr = 1e-4,
  dtype = "bfloat16",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

-- `slapo-lua tune plan.lua --nproc 32` runs the plans above as knobs, the best predicted first
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
plan.micro_batches = knob("micro_batches", { 1, 2, 4, 8, 16, 32 }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / plan.dp / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * plan.dp * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))
slapo.predict({
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.735367, peak_gib = 68.9 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.785141, peak_gib = 69.4 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.79355, peak_gib = 66.9 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.805678, peak_gib = 37.8 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.857562, peak_gib = 63.4 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.868257, peak_gib = 56.8 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.894064, peak_gib = 35.2 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.900661, peak_gib = 22.8 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.900726, peak_gib = 41 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.913344, peak_gib = 40.3 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.919282, peak_gib = 11.4 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.931446, peak_gib = 33.1 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.934834, peak_gib = 18.2 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.943844, peak_gib = 12.7 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.94541, peak_gib = 72 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.945814, peak_gib = 24.5 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.954417, peak_gib = 13.9 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.954474, peak_gib = 65.2 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.972437, peak_gib = 8.34 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.976534, peak_gib = 16.6 },
  { tp = 8, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.989167, peak_gib = 40 },
  { tp = 8, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.996374, peak_gib = 38.9 },
  { tp = 8, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.00967, peak_gib = 22.2 },
  { tp = 8, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.02408, peak_gib = 21.1 },
  { tp = 8, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.03132, peak_gib = 48.1 },
  { tp = 8, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.03741, peak_gib = 30.3 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.04373, peak_gib = 19 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.04597, peak_gib = 44.7 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.04794, peak_gib = 16.5 },
  { tp = 8, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.05065, peak_gib = 41.1 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.05109, peak_gib = 29.9 },
  { tp = 8, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.05673, peak_gib = 23.3 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.0579, peak_gib = 12.6 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.06631, peak_gib = 10 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.06931, peak_gib = 9.36 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.08612, peak_gib = 6.8 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.12307, peak_gib = 39.2 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.13188, peak_gib = 28.4 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.14914, peak_gib = 54.7 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.15528, peak_gib = 22 },
  { tp = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.16597, peak_gib = 21.5 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.16732, peak_gib = 38.1 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.17308, peak_gib = 31.6 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.1753, peak_gib = 52.5 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.17697, peak_gib = 11.9 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.17765, peak_gib = 26.8 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.18298, peak_gib = 51.4 },
  { tp = 8, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.18529, peak_gib = 14.4 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.18875, peak_gib = 19.6 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.19967, peak_gib = 59 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.21241, peak_gib = 21.6 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.21817, peak_gib = 15.1 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.22274, peak_gib = 10.3 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.22373, peak_gib = 26 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.24576, peak_gib = 19.4 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.25573, peak_gib = 11.7 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.26882, peak_gib = 9.5 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.27192, peak_gib = 17.2 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.2796, peak_gib = 16.1 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.29629, peak_gib = 23.7 },
  { tp = 8, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.30933, peak_gib = 17 },
  { tp = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.30975, peak_gib = 25.8 },
  { tp = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.31155, peak_gib = 24.7 },
  { tp = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.32679, peak_gib = 15.1 },
  { tp = 8, micro_batches = 32, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.32865, peak_gib = 9.96 },
  { tp = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.3304, peak_gib = 14.1 },
  { tp = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.33612, peak_gib = 13.3 },
  { tp = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.36088, peak_gib = 9.79 },
  { tp = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.36272, peak_gib = 34 },
  { tp = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.36809, peak_gib = 8.7 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.37152, peak_gib = 7.75 },
  { tp = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.37616, peak_gib = 23.3 },
  { tp = 8, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.38204, peak_gib = 26.9 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.38691, peak_gib = 56.4 },
  { tp = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.38966, peak_gib = 7.11 },
  { tp = 8, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.39548, peak_gib = 16.2 },
  { tp = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.40304, peak_gib = 17.9 },
  { tp = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.40407, peak_gib = 6.03 },
  { tp = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.4174, peak_gib = 15.3 },
  { tp = 8, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.42236, peak_gib = 10.9 },
  { tp = 8, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.43672, peak_gib = 8.19 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.58437, peak_gib = 31 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.58437, peak_gib = 29.3 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.58678, peak_gib = 34.2 },
  { tp = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.60068, peak_gib = 13.9 },
  { tp = 8, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.62, peak_gib = 6.86 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.64543, peak_gib = 19.4 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.64823, peak_gib = 33.7 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.65681, peak_gib = 62.4 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.66298, peak_gib = 8.16 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.67626, peak_gib = 6.18 },
  { tp = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.70307, peak_gib = 12.2 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.72444, peak_gib = 5.19 },
  { tp = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 1.77083, peak_gib = 5.78 },
  { tp = 8, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 1.81572, peak_gib = 13.2 },
  { tp = 8, micro_batches = 32, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 1.83504, peak_gib = 6.19 },
  { tp = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 1.91554, peak_gib = 4.69 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.1663, peak_gib = 14 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.17851, peak_gib = 24.4 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.19948, peak_gib = 45 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.20565, peak_gib = 17.9 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.20911, peak_gib = 10.6 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.26067, peak_gib = 6.94 },
  { tp = 8, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.26655, peak_gib = 8.88 },
  { tp = 8, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 2.55071, peak_gib = 5.11 },
  { tp = 8, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.10681, peak_gib = 7.8 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.1466, peak_gib = 11.5 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.22884, peak_gib = 18.9 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.24097, peak_gib = 4.38 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.25943, peak_gib = 5.1 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.28481, peak_gib = 33.6 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.29098, peak_gib = 6.52 },
  { tp = 8, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 3.39096, peak_gib = 4.03 },
})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({ tp = plan.tp })
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local vocab = slapo.models.config(model).vocab_size

-- Each layer's tensor parallelism, from the intra-op pass: the cbc ILP on one layer for 2 x 16 ranks (tp x dp, its tokens split between projections), 7 of its 7 projections sharded (229 variables, 709 constraints).
-- The predictions above price this layout. Edit a line (keep a projection whole, say) and run again;
-- `local shard_layer = nil` in its place runs the reference schedule's (Megatron's) layout.
local function shard_layer(layer)
  layer["mlp.down_proj"]:shard("weight", 1):sync("fwd_post", "reduce_scatter", { axis = 1 })
  layer["mlp.gate_proj"]:shard("weight", 0)
  layer["mlp.up_proj"]:shard("weight", 0)
  layer["self_attn.k_proj"]:shard("weight", 0)
  layer["self_attn.o_proj"]:shard("weight", 1):sync("fwd_post", "reduce_scatter", { axis = 1 })
  layer["self_attn.q_proj"]:shard("weight", 0)
  layer["self_attn.v_proj"]:shard("weight", 0)
  layer["mlp"]:sync("fwd_pre", "all_gather", { axis = 1, grad = "reduce_scatter" })
  layer["self_attn"]:sync("fwd_pre", "all_gather", { axis = 1, grad = "reduce_scatter" })
  layer["input_layernorm"]:sync("bwd_params", "all_reduce")
  layer["post_attention_layernorm"]:sync("bwd_params", "all_reduce")
end
local shard_layer_splits_tokens = true  -- it was written for sequence parallelism
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
  for _, note in ipairs(require("slapo.schedules.llama").schedule(s, { checkpoint = plan.checkpoint,
    layer = shard_layer })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  -- each layer, then the rest at the root (FSDP2's order)
  local options = { group = layout.dp_group, reshard_after_forward = plan.reshard_after_forward }
  for _, list in ipairs({ "model.layers" }) do
    local layers = s[list]:children()
    sequence_parallel(layers, 1, #layers)
    if plan.fully_shard and plan.dp > 1 then
      for _, layer in ipairs(layers) do layer:fully_shard(options) end
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
