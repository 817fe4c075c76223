-- slapo-lua plan: llama-7b on 8 x 8 NVIDIA H100 80GB HBM3, batch 16 x seq 131072
-- Run it: slapo-lua run --nproc 64 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 4 x dp 16, cp 4, 4 micro, zero-2                     7.7595 s   40.03 GiB  chosen
--   tp 4 x dp 16, cp 4, 4 micro, sequence, zero-2           7.7595 s   39.83 GiB  0% slower
--   tp 4 x dp 16, cp 4, 4 micro, fully sharded              7.7782 s   37.28 GiB  0% slower
--   tp 4 x dp 16, cp 4, 4 micro, sequence, fully sharded    7.7782 s   37.08 GiB  0% slower
--   tp 4 x dp 16, cp 4, 4 micro                             7.8639 s   60.43 GiB  1% slower
--   tp 4 x dp 16, cp 4, 4 micro, sequence                   7.8639 s   60.24 GiB  1% slower
--   tp 4 x dp 16, cp 4, 4 micro, zero-1                     7.9123 s   42.78 GiB  2% slower
--   tp 4 x dp 16, cp 4, 4 micro, sequence, zero-1           7.9123 s   42.59 GiB  2% slower
--   tp 8 x dp 8, cp 2, 4 micro, sequence, zero-2            7.9584 s   51.83 GiB  3% slower
--   tp 8 x dp 8, cp 4, 4 micro, sequence, zero-2            7.9584 s   51.83 GiB  3% slower
--   tp 8 x dp 8, cp 2, 4 micro, sequence, fully sharded     7.9837 s   44.82 GiB  3% slower
--   tp 8 x dp 8, cp 4, 4 micro, sequence, fully sharded     7.9837 s   44.82 GiB  3% slower
--   tp 8 x dp 8, cp 4, 8 micro, sequence, zero-2            8.0269 s   34.28 GiB  3% slower
--   tp 8 x dp 8, cp 4, 8 micro, sequence, fully sharded     8.0774 s   27.27 GiB  4% slower
--   tp 8 x dp 8, cp 2, 4 micro, sequence, zero-1            8.3943 s   58.84 GiB  8% slower
--   tp 8 x dp 8, cp 4, 4 micro, sequence, zero-1            8.3943 s   58.84 GiB  8% slower
--   tp 8 x dp 8, cp 4, 8 micro, sequence, zero-1            8.4122 s   41.29 GiB  8% slower
--   tp 8 x dp 8, cp 2, 4 micro, zero-2                      8.4732 s   38.73 GiB  9% slower
--   tp 8 x dp 8, cp 4, 4 micro, zero-2                      8.4732 s   38.73 GiB  9% slower
--   tp 8 x dp 8, cp 2, 4 micro, fully sharded               8.4819 s   37.45 GiB  9% slower
--   ... and 2396 more

local plan = {
  model = "llama-7b",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 4,           -- tensor parallel ranks (Megatron layout from slapo.schedules.llama)
  dp = 16,           -- data parallel replicas
  cp = 4,           -- context parallelism: each sequence split over cp replicas
  cp_method = "ring",  -- "ring" (ring attention), or "all_to_all" (Ulysses: a rank's heads over cp)
  checkpoint = 0.0,  -- fraction of layers whose activations are recomputed in backward
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = true,  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = false,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  micro_batches = 4,  -- each replica's batch in this many parts, their gradients accumulated
  sequence = false,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 16, seq = 131072, steps = 2, lr = 1e-4,
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
plan.cp = knob("cp", { 1, 2, 4, 8, 16, 32, 64 }, plan.cp)
plan.cp_method = knob("cp_method", { "ring", "all_to_all" }, plan.cp_method)
plan.micro_batches = knob("micro_batches", { 1, 2, 4, 8, 16 }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / (plan.dp / plan.cp) / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * (plan.dp / plan.cp) * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, (plan.dp / plan.cp), plan.micro_batches))
slapo.predict({
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 7.75954, peak_gib = 40 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 7.77816, peak_gib = 37.3 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 7.86388, peak_gib = 60.4 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 7.91227, peak_gib = 42.8 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.47324, peak_gib = 38.7 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.47324, peak_gib = 38.7 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.48192, peak_gib = 37.5 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.48192, peak_gib = 37.5 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.52193, peak_gib = 48.2 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.52193, peak_gib = 48.2 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.52645, peak_gib = 20.9 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.54383, peak_gib = 19.6 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.54451, peak_gib = 40 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.54451, peak_gib = 40 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.55777, peak_gib = 30.4 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.58035, peak_gib = 22.2 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.75733, peak_gib = 43.2 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.79581, peak_gib = 37.5 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.82106, peak_gib = 40 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.83968, peak_gib = 37.3 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 8.85931, peak_gib = 49.9 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.9254, peak_gib = 60.4 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 8.93751, peak_gib = 38.3 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 8.97378, peak_gib = 42.8 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.03382, peak_gib = 40 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.05244, peak_gib = 37.3 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.07295, peak_gib = 48.9 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.13815, peak_gib = 60.4 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.15809, peak_gib = 22.4 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.17067, peak_gib = 38.7 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.17936, peak_gib = 37.5 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.18654, peak_gib = 42.8 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.19533, peak_gib = 19.6 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.19923, peak_gib = 49.9 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.21936, peak_gib = 48.2 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.22519, peak_gib = 42.8 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.24194, peak_gib = 40 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.27358, peak_gib = 25.1 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.27744, peak_gib = 38.3 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.32577, peak_gib = 32.4 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.44343, peak_gib = 43.2 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.48191, peak_gib = 37.5 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.48217, peak_gib = 20.8 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.50074, peak_gib = 61.5 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.52123, peak_gib = 25.7 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.53475, peak_gib = 38.7 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.54344, peak_gib = 37.5 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.58344, peak_gib = 48.2 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.59819, peak_gib = 20 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.60602, peak_gib = 40 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.61869, peak_gib = 20.9 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.63606, peak_gib = 19.6 },
  { tp = 1, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.63999, peak_gib = 31.1 },
  { tp = 1, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.63999, peak_gib = 31.1 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.65, peak_gib = 30.4 },
  { tp = 1, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.65955, peak_gib = 19.5 },
  { tp = 1, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.65955, peak_gib = 19.5 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 9.6599, peak_gib = 67.9 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.67258, peak_gib = 22.2 },
  { tp = 1, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.6791, peak_gib = 23 },
  { tp = 1, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.7182, peak_gib = 11.4 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.75906, peak_gib = 48.9 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.75989, peak_gib = 31.4 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.81079, peak_gib = 44 },
  { tp = 1, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.81755, peak_gib = 31.1 },
  { tp = 1, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.8371, peak_gib = 19.5 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 9.84066, peak_gib = 61.5 },
  { tp = 1, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.85387, peak_gib = 31.1 },
  { tp = 1, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.87342, peak_gib = 19.5 },
  { tp = 2, cp = 2, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.90223, peak_gib = 32.3 },
  { tp = 2, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.90223, peak_gib = 32.3 },
  { tp = 1, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.90641, peak_gib = 23 },
  { tp = 2, cp = 2, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.91185, peak_gib = 26.6 },
  { tp = 2, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.91185, peak_gib = 26.6 },
  { tp = 2, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 9.92339, peak_gib = 20.2 },
  { tp = 2, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.94263, peak_gib = 14.5 },
  { tp = 1, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 9.94551, peak_gib = 11.4 },
  { tp = 2, cp = 2, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.0187, peak_gib = 32.3 },
  { tp = 2, cp = 2, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.0283, peak_gib = 26.6 },
  { tp = 2, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.0798, peak_gib = 32.3 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.0841, peak_gib = 43.2 },
  { tp = 2, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.0894, peak_gib = 26.6 },
  { tp = 2, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.1067, peak_gib = 20.2 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.1226, peak_gib = 37.5 },
  { tp = 2, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.1259, peak_gib = 14.5 },
  { tp = 2, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.1775, peak_gib = 62.4 },
  { tp = 2, cp = 2, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.2756, peak_gib = 38 },
  { tp = 2, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.2756, peak_gib = 38 },
  { tp = 2, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.2775, peak_gib = 25.9 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.3548, peak_gib = 45 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.3548, peak_gib = 45 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.3595, peak_gib = 42.2 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.3595, peak_gib = 42.2 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.3606, peak_gib = 40 },
  { tp = 2, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.3608, peak_gib = 62.4 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.3699, peak_gib = 24.9 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.3699, peak_gib = 24.9 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.3792, peak_gib = 22.1 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.3792, peak_gib = 22.1 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.3792, peak_gib = 37.3 },
  { tp = 2, cp = 2, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.392, peak_gib = 38 },
  { tp = 1, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.3987, peak_gib = 42.7 },
  { tp = 1, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.3987, peak_gib = 42.7 },
  { tp = 1, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.3987, peak_gib = 34.6 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.3997, peak_gib = 48.9 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.4, peak_gib = 14.8 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.4186, peak_gib = 12.1 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.4311, peak_gib = 22.4 },
  { tp = 2, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.4531, peak_gib = 38 },
  { tp = 2, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.4608, peak_gib = 25.9 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4649, peak_gib = 60.4 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.4684, peak_gib = 19.6 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.4713, peak_gib = 45 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.4759, peak_gib = 42.2 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4871, peak_gib = 65.4 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4871, peak_gib = 65.4 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 10.4883, peak_gib = 24.9 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4928, peak_gib = 45.3 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4928, peak_gib = 45.3 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 10.4976, peak_gib = 22.1 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4982, peak_gib = 42.8 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.5044, peak_gib = 35.2 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5133, peak_gib = 42.8 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5355, peak_gib = 47.7 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5355, peak_gib = 47.7 },
  { tp = 4, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5412, peak_gib = 27.6 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5412, peak_gib = 27.6 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5466, peak_gib = 25.1 },
  { tp = 4, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5527, peak_gib = 17.6 },
  { tp = 1, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.5763, peak_gib = 42.7 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.6035, peak_gib = 65.4 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.6112, peak_gib = 45.3 },
  { tp = 1, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.6126, peak_gib = 42.7 },
  { tp = 1, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.626, peak_gib = 34.6 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.6519, peak_gib = 47.7 },
  { tp = 4, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 10.6596, peak_gib = 27.6 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.0743, peak_gib = 38.7 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.083, peak_gib = 37.5 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.123, peak_gib = 48.2 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.1454, peak_gib = 20.9 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.1456, peak_gib = 40 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.1628, peak_gib = 19.6 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.1767, peak_gib = 30.4 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.1993, peak_gib = 22.2 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.2843, peak_gib = 21.5 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.2877, peak_gib = 12 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.3068, peak_gib = 13.3 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.3225, peak_gib = 10.7 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.4279, peak_gib = 39.2 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.4279, peak_gib = 39.2 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.4322, peak_gib = 37.9 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.4322, peak_gib = 37.9 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.4635, peak_gib = 21.1 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.4635, peak_gib = 21.1 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.4721, peak_gib = 19.8 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.4721, peak_gib = 19.8 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.4853, peak_gib = 48.7 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.4853, peak_gib = 48.7 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.5078, peak_gib = 40.5 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.5078, peak_gib = 40.5 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.5121, peak_gib = 30.6 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.5121, peak_gib = 30.6 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.5346, peak_gib = 12.1 },
  { tp = 8, cp = 2, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.5347, peak_gib = 22.4 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.5347, peak_gib = 22.4 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.552, peak_gib = 10.8 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.5659, peak_gib = 21.6 },
  { tp = 8, cp = 4, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 11.5885, peak_gib = 13.4 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.7183, peak_gib = 31.1 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.733, peak_gib = 32.3 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.7378, peak_gib = 19.5 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.7426, peak_gib = 26.6 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.781, peak_gib = 20.2 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.8003, peak_gib = 14.5 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.8764, peak_gib = 23 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.8771, peak_gib = 14.2 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.9125, peak_gib = 45 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.9155, peak_gib = 11.4 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.9156, peak_gib = 8.49 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.9172, peak_gib = 42.2 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.9391, peak_gib = 24.9 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 11.9484, peak_gib = 22.1 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 11.9923, peak_gib = 14.8 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.0109, peak_gib = 12.1 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.0235, peak_gib = 19 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.0351, peak_gib = 62.4 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.0448, peak_gib = 65.4 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.0621, peak_gib = 45.3 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.0927, peak_gib = 56.4 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.0932, peak_gib = 47.7 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.0966, peak_gib = 35.2 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.1017, peak_gib = 7.36 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.1063, peak_gib = 38 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.1105, peak_gib = 27.6 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.1351, peak_gib = 25.9 },
  { tp = 4, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.145, peak_gib = 17.6 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.1856, peak_gib = 45 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.1902, peak_gib = 42.2 },
  { tp = 2, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.1927, peak_gib = 19.9 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.2275, peak_gib = 24.9 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.2368, peak_gib = 22.1 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.3114, peak_gib = 14.8 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.3179, peak_gib = 65.4 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.3214, peak_gib = 31.1 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.3301, peak_gib = 12.1 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.3409, peak_gib = 19.5 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.3505, peak_gib = 45.3 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.3662, peak_gib = 47.7 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.3989, peak_gib = 27.6 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.4158, peak_gib = 35.2 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.4181, peak_gib = 23 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.4422, peak_gib = 19 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.4572, peak_gib = 11.4 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.4642, peak_gib = 17.6 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.4664, peak_gib = 39.2 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.4707, peak_gib = 37.9 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.477, peak_gib = 42.7 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.4792, peak_gib = 9.78 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.5096, peak_gib = 21.1 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.5165, peak_gib = 7.03 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.5183, peak_gib = 19.8 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.5204, peak_gib = 7.36 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.5237, peak_gib = 48.7 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.5463, peak_gib = 40.5 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.5463, peak_gib = 30.2 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.5583, peak_gib = 30.6 },
  { tp = 8, cp = 2, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.5809, peak_gib = 22.4 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.5836, peak_gib = 32.3 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.5932, peak_gib = 26.6 },
  { tp = 4, cp = 8, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.5947, peak_gib = 12.5 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.5961, peak_gib = 34.6 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.6464, peak_gib = 16.9 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.6624, peak_gib = 20.2 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.6649, peak_gib = 30.6 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.6816, peak_gib = 14.5 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.8028, peak_gib = 5.34 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.8199, peak_gib = 14.2 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 12.8584, peak_gib = 8.49 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 12.9165, peak_gib = 62.4 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.9252, peak_gib = 11.2 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 12.957, peak_gib = 38 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 12.9971, peak_gib = 39.2 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.0015, peak_gib = 37.9 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.0021, peak_gib = 5.47 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.0165, peak_gib = 25.9 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.0355, peak_gib = 56.4 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.0545, peak_gib = 48.7 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.0557, peak_gib = 21.1 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.0638, peak_gib = 53.3 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.0644, peak_gib = 19.8 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.0771, peak_gib = 40.5 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.0801, peak_gib = 42.7 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.0837, peak_gib = 30.6 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.1044, peak_gib = 30.6 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.127, peak_gib = 22.4 },
  { tp = 1, cp = 32, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.1314, peak_gib = 28.5 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.1355, peak_gib = 19.9 },
  { tp = 1, cp = 16, cp_method = "all_to_all", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.1377, peak_gib = 34.6 },
  { tp = 2, cp = 16, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.1638, peak_gib = 16.9 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.1729, peak_gib = 12.1 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.1903, peak_gib = 10.8 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.2043, peak_gib = 21.6 },
  { tp = 8, cp = 4, cp_method = "all_to_all", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.2268, peak_gib = 13.4 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.3531, peak_gib = 32.3 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.3627, peak_gib = 26.6 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.381, peak_gib = 20.2 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.4002, peak_gib = 14.5 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.4368, peak_gib = 14.2 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.4752, peak_gib = 8.49 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.6351, peak_gib = 62.4 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.6524, peak_gib = 56.4 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.7265, peak_gib = 38 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.7351, peak_gib = 25.9 },
  { tp = 2, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.7524, peak_gib = 19.9 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.8057, peak_gib = 45 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.8104, peak_gib = 42.2 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.8275, peak_gib = 24.9 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.8368, peak_gib = 22.1 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.8711, peak_gib = 14.8 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.8897, peak_gib = 12.1 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.938, peak_gib = 65.4 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.9505, peak_gib = 45.3 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 13.9582, peak_gib = 9.78 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.9754, peak_gib = 35.2 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.9864, peak_gib = 47.7 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 13.9955, peak_gib = 7.03 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 13.9988, peak_gib = 27.6 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 14.0238, peak_gib = 17.6 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 14.0253, peak_gib = 30.2 },
  { tp = 4, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 14.0737, peak_gib = 12.5 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 14.8855, peak_gib = 39.2 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 14.8898, peak_gib = 37.9 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 14.9345, peak_gib = 21.1 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 14.9429, peak_gib = 48.7 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 14.9432, peak_gib = 19.8 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 14.9655, peak_gib = 40.5 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 14.9832, peak_gib = 30.6 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 15.0058, peak_gib = 22.4 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 15.0325, peak_gib = 12.1 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 15.0499, peak_gib = 10.8 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 15.0638, peak_gib = 21.6 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 15.0864, peak_gib = 13.4 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 15.2251, peak_gib = 17.1 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 15.2286, peak_gib = 7.58 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 15.2477, peak_gib = 8.86 },
  { tp = 8, cp = 8, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 15.2633, peak_gib = 6.3 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 17.8162, peak_gib = 49.9 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 17.8944, peak_gib = 38.3 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 18.023, peak_gib = 25.7 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 18.0604, peak_gib = 43.2 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 18.0989, peak_gib = 37.5 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 18.1, peak_gib = 20 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.1617, peak_gib = 67.9 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 18.2617, peak_gib = 31.4 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 18.3369, peak_gib = 40 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 18.3556, peak_gib = 37.3 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 18.3761, peak_gib = 48.9 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 18.4279, peak_gib = 22.4 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.4413, peak_gib = 60.4 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.4436, peak_gib = 34 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 18.4509, peak_gib = 13.6 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 18.4577, peak_gib = 61.5 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 18.4652, peak_gib = 19.6 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 18.4897, peak_gib = 42.8 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 18.492, peak_gib = 16.3 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.495, peak_gib = 42.8 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 18.5254, peak_gib = 10.8 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 18.5434, peak_gib = 25.1 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 23.6976, peak_gib = 19 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 23.7064, peak_gib = 31.1 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 23.7259, peak_gib = 19.5 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 23.7599, peak_gib = 23 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 23.7758, peak_gib = 7.36 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 23.799, peak_gib = 11.4 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 23.9686, peak_gib = 32.3 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 23.9782, peak_gib = 26.6 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.0042, peak_gib = 20.2 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.0078, peak_gib = 11.2 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.0234, peak_gib = 14.5 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.0753, peak_gib = 14.2 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.0847, peak_gib = 5.47 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.1138, peak_gib = 8.49 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.1464, peak_gib = 53.3 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.2464, peak_gib = 16.9 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.2583, peak_gib = 62.4 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.2909, peak_gib = 56.4 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.3391, peak_gib = 30.6 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.342, peak_gib = 38 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.3583, peak_gib = 25.9 },
  { tp = 2, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.3909, peak_gib = 19.9 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.4212, peak_gib = 45 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.4259, peak_gib = 42.2 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.4507, peak_gib = 24.9 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.46, peak_gib = 22.1 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.4651, peak_gib = 42.7 },
  { tp = 1, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.4795, peak_gib = 34.6 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.5096, peak_gib = 14.8 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.5282, peak_gib = 12.1 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.5535, peak_gib = 65.4 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.5736, peak_gib = 45.3 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.6019, peak_gib = 47.7 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.6139, peak_gib = 35.2 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.622, peak_gib = 27.6 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.6275, peak_gib = 9.78 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.645, peak_gib = 27.7 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 24.6524, peak_gib = 7.27 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.6623, peak_gib = 17.6 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.6647, peak_gib = 7.03 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.6934, peak_gib = 10 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.6946, peak_gib = 30.2 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 24.7268, peak_gib = 4.52 },
  { tp = 4, cp = 16, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 24.743, peak_gib = 12.5 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 34.1427, peak_gib = 49.9 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 34.2209, peak_gib = 38.3 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 34.3711, peak_gib = 32.4 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 34.3869, peak_gib = 43.2 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 34.3904, peak_gib = 25.7 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 34.4254, peak_gib = 37.5 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 34.4674, peak_gib = 20 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 34.5275, peak_gib = 20.8 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 34.5291, peak_gib = 67.9 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 34.6291, peak_gib = 31.4 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 34.7025, peak_gib = 48.9 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 34.7649, peak_gib = 59.1 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 34.7801, peak_gib = 16.9 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 34.7841, peak_gib = 61.5 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 34.8561, peak_gib = 44 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 34.8649, peak_gib = 22.6 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 34.934, peak_gib = 11.2 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.4357, peak_gib = 31.1 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.4553, peak_gib = 19.5 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.4731, peak_gib = 19 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.5046, peak_gib = 23 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.5437, peak_gib = 11.4 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.5513, peak_gib = 7.36 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.6979, peak_gib = 32.3 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.7076, peak_gib = 26.6 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.7389, peak_gib = 16.9 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.7489, peak_gib = 20.2 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.7681, peak_gib = 14.5 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.8446, peak_gib = 11.2 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 45.8507, peak_gib = 14.2 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.8892, peak_gib = 8.49 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.8953, peak_gib = 5.34 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 45.9216, peak_gib = 5.47 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 45.9833, peak_gib = 53.3 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 46.003, peak_gib = 62.4 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 46.0663, peak_gib = 56.4 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.0713, peak_gib = 38 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.0833, peak_gib = 16.9 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.103, peak_gib = 25.9 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.1145, peak_gib = 30.6 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.1663, peak_gib = 19.9 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.1945, peak_gib = 42.7 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.2239, peak_gib = 28.5 },
  { tp = 1, cp = 32, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.2242, peak_gib = 34.6 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 46.326, peak_gib = 51.8 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 46.3413, peak_gib = 9.66 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 46.426, peak_gib = 15.4 },
  { tp = 2, cp = 32, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 46.4952, peak_gib = 3.96 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 67.1277, peak_gib = 49.9 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 67.2059, peak_gib = 38.3 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 67.438, peak_gib = 32.4 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 67.5944, peak_gib = 20.8 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 67.7691, peak_gib = 61.5 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 67.923, peak_gib = 44 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 68.2456, peak_gib = 35.3 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 70.0738, peak_gib = 23.7 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 74.3875, peak_gib = 12.1 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 89.3372, peak_gib = 31.1 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 89.3567, peak_gib = 19.5 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 89.4368, peak_gib = 23 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 89.4667, peak_gib = 19 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 89.4759, peak_gib = 11.4 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 89.5449, peak_gib = 7.36 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 89.8554, peak_gib = 16.9 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 90.0118, peak_gib = 5.34 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 90.0959, peak_gib = 42.7 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 90.1081, peak_gib = 30.6 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 90.1564, peak_gib = 34.6 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 90.3404, peak_gib = 28.5 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 90.8242, peak_gib = 27.5 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 92.6525, peak_gib = 15.9 },
  { tp = 1, cp = 64, cp_method = "ring", micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 94.7017, peak_gib = 4.33 },
})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({ tp = plan.tp, cp = plan.cp })
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local vocab = slapo.models.config(model).vocab_size

-- Each layer's tensor parallelism, from the intra-op pass: the cbc ILP on one layer for 4 x 16 ranks (tp x dp), 7 of its 7 projections sharded (144 variables, 255 constraints).
-- The predictions above price this layout. Edit a line (keep a projection whole, say) and run again;
-- `local shard_layer = nil` in its place runs the reference schedule's (Megatron's) layout.
local function shard_layer(layer)
  layer["mlp.down_proj"]:shard("weight", 1):sync("fwd_post", "all_reduce")
  layer["mlp.gate_proj"]:shard("weight", 0)
  layer["mlp.up_proj"]:shard("weight", 0)
  layer["self_attn.k_proj"]:shard("weight", 0)
  layer["self_attn.o_proj"]:shard("weight", 1):sync("fwd_post", "all_reduce")
  layer["self_attn.q_proj"]:shard("weight", 0)
  layer["self_attn.v_proj"]:shard("weight", 0)
  layer["mlp"]:sync("bwd_post", "all_reduce")
  layer["self_attn"]:sync("bwd_post", "all_reduce")
end
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
  if plan.cp > 1 then s:context_parallel({ group = layout.cp_group, method = plan.cp_method }) end
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
