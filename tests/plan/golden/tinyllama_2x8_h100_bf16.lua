-- slapo-lua plan: TinyLlama-1.1B on 2 x 8 NVIDIA H100 80GB HBM3, batch 64 x seq 2048
-- Run it: slapo-lua run --nproc 16 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 1 x dp 16, zero-2                                            0.1417 s   70.90 GiB  chosen
--   tp 1 x dp 16, fully sharded                                     0.1486 s   69.14 GiB  5% slower
--   tp 1 x dp 8 x pp 2 (11+11), 8 micro, zero-2                     0.1555 s   19.50 GiB  10% slower
--   tp 2 x dp 8, sequence, zero-2                                   0.1561 s   71.22 GiB  10% slower
--   tp 1 x dp 8 x pp 2 (11+11), 8 micro, fully sharded              0.1572 s   18.88 GiB  11% slower
--   tp 1 x dp 8 x pp 2 (11+11), 8 micro, zero-1                     0.1576 s   19.49 GiB  11% slower
--   tp 2 x dp 8, 2 micro, zero-2                                    0.1593 s   38.19 GiB  12% slower
--   tp 2 x dp 8, 2 micro, sequence, zero-2                          0.1593 s   36.64 GiB  12% slower
--   tp 2 x dp 8, sequence, fully sharded                            0.1593 s   70.41 GiB  12% slower
--   tp 1 x dp 8 x pp 2 (11+11), 8 micro                             0.1600 s   24.87 GiB  13% slower
--   tp 2 x dp 8, 2 micro, fully sharded                             0.1657 s   37.37 GiB  17% slower
--   tp 2 x dp 8, 2 micro, sequence, fully sharded                   0.1657 s   35.83 GiB  17% slower
--   tp 1 x dp 8 x pp 2 (11+11), 4 micro, zero-2                     0.1700 s   36.18 GiB  20% slower
--   tp 1 x dp 8 x pp 2 (11+11), 4 micro, fully sharded              0.1708 s   35.55 GiB  21% slower
--   tp 1 x dp 8 x pp 2 (11+11), 4 micro, zero-1                     0.1737 s   36.16 GiB  23% slower
--   tp 1 x dp 8 x pp 2 (11+11), 4 micro                             0.1761 s   41.54 GiB  24% slower
--   tp 2 x dp 4 x pp 2 (11+11), 4 micro, sequence, zero-2           0.1802 s   36.57 GiB  27% slower
--   tp 2 x dp 4 x pp 2 (11+11), 4 micro, sequence, fully sharded    0.1808 s   36.11 GiB  28% slower
--   tp 1 x dp 4 x pp 4 (5+6+5+6), 16 micro, zero-1                  0.1814 s   17.02 GiB  28% slower
--   tp 1 x dp 16, checkpoint, zero-2                                0.1825 s    7.93 GiB  29% slower
--   ... and 610 more
--   tp 1 x dp 8 x pp 2 (11+11), 8 micro, zero-1                     0.1576 s   19.49 GiB  11% slower (a submesh per stage)

local plan = {
  model = "TinyLlama-1.1B",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 1,           -- tensor parallel ranks (Megatron layout from slapo.schedules.llama)
  dp = 16,           -- data parallel replicas
  checkpoint = 0.0,  -- fraction of layers whose activations are recomputed in backward
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = true,  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = false,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  micro_batches = 1,  -- each replica's batch in this many parts, their gradients accumulated
  sequence = false,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 64, seq = 2048, steps = 2, lr = 1e-4,
  dtype = "bfloat16",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

-- `slapo-lua tune plan.lua --nproc 16` runs the plans above as knobs, the best predicted first
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
plan.tp = knob("tp", { 1, 2, 4 }, plan.tp)
plan.dp = math.floor(devices / plan.tp)
plan.checkpoint = knob("checkpoint", { 0.0, 1.0 }, plan.checkpoint)
plan.zero = knob("zero", { false, true }, plan.zero)
plan.fully_shard = knob("fully_shard", { false, true }, plan.fully_shard)
plan.reshard_after_forward = knob("reshard_after_forward", { true, false }, plan.reshard_after_forward)
assert(not (plan.zero and plan.fully_shard), "plan: zero (ZeRO-1) and fully_shard (ZeRO-3) are one or the other")
plan.micro_batches = knob("micro_batches", { 1, 2, 4, 8, 16 }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / plan.dp / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * plan.dp * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))
slapo.predict({
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.141701, peak_gib = 70.9 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.148567, peak_gib = 69.1 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.159262, peak_gib = 38.2 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.165671, peak_gib = 37.4 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.182534, peak_gib = 7.93 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.188354, peak_gib = 42.2 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.189401, peak_gib = 6.17 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.189635, peak_gib = 44.4 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.1911, peak_gib = 41.8 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.193896, peak_gib = 37.1 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.194469, peak_gib = 21.8 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.199962, peak_gib = 21.5 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.20137, peak_gib = 44.8 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.201992, peak_gib = 24.5 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.204402, peak_gib = 39 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.20652, peak_gib = 7.66 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.207699, peak_gib = 42.5 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.208321, peak_gib = 22.2 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.208924, peak_gib = 4.86 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.209725, peak_gib = 6.84 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.215333, peak_gib = 4.05 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.218597, peak_gib = 26.3 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.222117, peak_gib = 17.3 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.222724, peak_gib = 20.1 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.223485, peak_gib = 50.3 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.223485, peak_gib = 33.4 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.233365, peak_gib = 20.9 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.235978, peak_gib = 5.58 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.236885, peak_gib = 11.9 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.239297, peak_gib = 11.1 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.243301, peak_gib = 13.8 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.248273, peak_gib = 8.86 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.249646, peak_gib = 8.52 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.254064, peak_gib = 5.67 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.254979, peak_gib = 5.17 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.25513, peak_gib = 38.8 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.25513, peak_gib = 21.9 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.257726, peak_gib = 4.83 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.258069, peak_gib = 8.47 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.261351, peak_gib = 21.2 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.262318, peak_gib = 3.33 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.264036, peak_gib = 11.5 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.265567, peak_gib = 18.9 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.265567, peak_gib = 17.7 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.265979, peak_gib = 14.3 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.267811, peak_gib = 2.98 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.267996, peak_gib = 7.82 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.269841, peak_gib = 5.97 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.270365, peak_gib = 9.21 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.272058, peak_gib = 11.7 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.272308, peak_gib = 12 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.274325, peak_gib = 5.51 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.27617, peak_gib = 3.67 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.278187, peak_gib = 9.65 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.278618, peak_gib = 35.3 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.278905, peak_gib = 19.3 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.280531, peak_gib = 3.82 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.282314, peak_gib = 3.46 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.283467, peak_gib = 8.96 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.287099, peak_gib = 9.22 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.288276, peak_gib = 11.3 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.292955, peak_gib = 4.28 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.292996, peak_gib = 9.68 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.293428, peak_gib = 6.91 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.295132, peak_gib = 2.65 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.297212, peak_gib = 7.34 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.297212, peak_gib = 6.16 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.298235, peak_gib = 3.58 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.356897, peak_gib = 5.05 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.362976, peak_gib = 2.4 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.363226, peak_gib = 2.75 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.365862, peak_gib = 11.1 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.368015, peak_gib = 20.1 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.369928, peak_gib = 4.41 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.373963, peak_gib = 2.06 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.380913, peak_gib = 6.57 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.383849, peak_gib = 2.76 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.388577, peak_gib = 4.59 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.394906, peak_gib = 2.28 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.47716, peak_gib = 1.94 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.523948, peak_gib = 6.23 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.532736, peak_gib = 10.3 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.545148, peak_gib = 1.95 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.546808, peak_gib = 18.4 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.548721, peak_gib = 2.65 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.567511, peak_gib = 1.6 },
})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({ tp = plan.tp })
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local vocab = slapo.models.config(model).vocab_size

-- each layer's tensor parallelism: the reference schedule's (Megatron's) layout
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
