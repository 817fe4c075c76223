-- slapo-lua plan: bert-large-uncased on 1 x 4 NVIDIA H100 80GB HBM3, batch 32 x seq 512
-- Run it: slapo-lua run --nproc 4 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 2 x dp 2, sequence, zero-2                           0.0282 s    9.88 GiB  chosen
--   tp 2 x dp 2, sequence, fully sharded                    0.0282 s    9.67 GiB  0% slower
--   tp 1 x dp 4, zero-2                                     0.0283 s    9.22 GiB  0% slower
--   tp 1 x dp 4, fully sharded                              0.0284 s    8.80 GiB  1% slower
--   tp 1 x dp 4, 2 micro, zero-2                            0.0286 s    5.51 GiB  2% slower
--   tp 1 x dp 4, 2 micro, fully sharded                     0.0290 s    5.10 GiB  3% slower
--   tp 1 x dp 4, 4 micro, zero-2                            0.0293 s    3.66 GiB  4% slower
--   tp 2 x dp 2, sequence, zero-1                           0.0298 s   10.09 GiB  6% slower
--   tp 2 x dp 2, zero-2                                     0.0299 s    9.70 GiB  6% slower
--   tp 2 x dp 2, fully sharded                              0.0300 s    9.57 GiB  7% slower
--   tp 1 x dp 4, 4 micro, fully sharded                     0.0300 s    3.24 GiB  7% slower
--   tp 2 x dp 2, sequence                                   0.0305 s   11.58 GiB  8% slower
--   tp 2 x dp 2, zero-1                                     0.0309 s    9.83 GiB  10% slower
--   tp 1 x dp 4, zero-1                                     0.0313 s    9.63 GiB  11% slower
--   tp 1 x dp 4, 2 micro, zero-1                            0.0313 s    5.93 GiB  11% slower
--   tp 1 x dp 4, 4 micro, zero-1                            0.0313 s    4.08 GiB  11% slower
--   tp 1 x dp 4, 8 micro, zero-1                            0.0313 s    3.16 GiB  11% slower
--   tp 2 x dp 2                                             0.0313 s   10.76 GiB  11% slower
--   tp 1 x dp 2 x pp 2 (12+12), 16 micro, zero-1            0.0324 s    2.56 GiB  15% slower
--   tp 1 x dp 2 x pp 2 (12+12), 16 micro, zero-2            0.0325 s    2.65 GiB  16% slower
--   ... and 192 more
--   tp 2 x dp 2, sequence, zero-1                           0.0298 s   10.09 GiB  6% slower (a submesh per stage)

local plan = {
  model = "bert-large-uncased",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 2,           -- tensor parallel ranks (Megatron layout from slapo.schedules.bert)
  dp = 2,           -- data parallel replicas
  checkpoint = 0.0,  -- fraction of layers whose activations are recomputed in backward
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = true,  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = false,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  micro_batches = 1,  -- each replica's batch in this many parts, their gradients accumulated
  sequence = true,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 32, seq = 512, steps = 2, lr = 1e-4,
  dtype = "bfloat16",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

-- `slapo-lua tune plan.lua --nproc 4` runs the plans above as knobs, the best predicted first
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
plan.micro_batches = knob("micro_batches", { 1, 2, 4, 8, 16, 32 }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / plan.dp / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * plan.dp * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))
slapo.predict({
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0281516, peak_gib = 9.88 },
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0282196, peak_gib = 9.67 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0282636, peak_gib = 9.22 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0284397, peak_gib = 8.8 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0286158, peak_gib = 5.51 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0289681, peak_gib = 5.1 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0293203, peak_gib = 3.66 },
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0298124, peak_gib = 10.1 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0300248, peak_gib = 3.24 },
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0304774, peak_gib = 11.6 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0312888, peak_gib = 9.63 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0312888, peak_gib = 5.93 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0312888, peak_gib = 4.08 },
  { tp = 1, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0312888, peak_gib = 3.16 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0325269, peak_gib = 12.4 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0325269, peak_gib = 8.73 },
  { tp = 1, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0325269, peak_gib = 6.87 },
  { tp = 1, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0325269, peak_gib = 5.95 },
  { tp = 1, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0330459, peak_gib = 2.74 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0367794, peak_gib = 2.75 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0368681, peak_gib = 3.45 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0369362, peak_gib = 3.24 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0369555, peak_gib = 2.34 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0371317, peak_gib = 2.28 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0374839, peak_gib = 1.86 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0378362, peak_gib = 2.05 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0385289, peak_gib = 3.65 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0385407, peak_gib = 1.63 },
  { tp = 1, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0390879, peak_gib = 2.32 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0391939, peak_gib = 5.15 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0398046, peak_gib = 3.17 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0398046, peak_gib = 2.7 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0398046, peak_gib = 2.47 },
  { tp = 1, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0398046, peak_gib = 2.35 },
  { tp = 4, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0399956, peak_gib = 13.2 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0403789, peak_gib = 8.55 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0410427, peak_gib = 5.97 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0410427, peak_gib = 5.5 },
  { tp = 1, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0410427, peak_gib = 5.26 },
  { tp = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0410427, peak_gib = 5.14 },
  { tp = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0415617, peak_gib = 1.93 },
  { tp = 1, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0429707, peak_gib = 1.51 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0515373, peak_gib = 6.82 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.052085, peak_gib = 5.36 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0760129, peak_gib = 6.09 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.076149, peak_gib = 5.88 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.077245, peak_gib = 4.2 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0775171, peak_gib = 3.99 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0775376, peak_gib = 6.3 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0782026, peak_gib = 7.8 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0784976, peak_gib = 4.41 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0791626, peak_gib = 5.9 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0797092, peak_gib = 3.25 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0802535, peak_gib = 3.04 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0804176, peak_gib = 3.46 },
  { tp = 2, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0810826, peak_gib = 4.96 },
  { tp = 2, micro_batches = 16, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0842576, peak_gib = 2.99 },
  { tp = 2, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0846377, peak_gib = 2.78 },
  { tp = 2, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0849226, peak_gib = 4.48 },
  { tp = 2, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0857261, peak_gib = 2.57 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0900214, peak_gib = 6.22 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0957814, peak_gib = 5.06 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.100771, peak_gib = 2.88 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.100908, peak_gib = 2.67 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.102296, peak_gib = 3.09 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.102484, peak_gib = 2.59 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.102756, peak_gib = 2.38 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.102961, peak_gib = 4.58 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.103736, peak_gib = 2.8 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.104401, peak_gib = 4.3 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.105908, peak_gib = 2.45 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.106452, peak_gib = 2.24 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.106616, peak_gib = 2.66 },
  { tp = 2, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.107281, peak_gib = 4.15 },
  { tp = 4, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.107301, peak_gib = 4.48 },
  { tp = 2, micro_batches = 16, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.112376, peak_gib = 2.65 },
  { tp = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.112756, peak_gib = 2.38 },
  { tp = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.113041, peak_gib = 4.08 },
  { tp = 2, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.113845, peak_gib = 2.17 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.11897, peak_gib = 4.63 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.12761, peak_gib = 4.26 },
  { tp = 4, micro_batches = 32, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.130341, peak_gib = 4.19 },
  { tp = 4, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.14489, peak_gib = 4.08 },
  { tp = 4, micro_batches = 32, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.17945, peak_gib = 4.02 },
})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({ tp = plan.tp })
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local vocab = slapo.models.config(model).vocab_size

-- Each layer's tensor parallelism, from the intra-op pass: the cbc ILP on one layer for 2 x 2 ranks (tp x dp, its tokens split between projections), 6 of its 6 projections sharded (142 variables, 420 constraints).
-- The predictions above price this layout. Edit a line (keep a projection whole, say) and run again;
-- `local shard_layer = nil` in its place runs the reference schedule's (Megatron's) layout.
local function shard_layer(layer)
  layer["attention.output.dense"]:shard("weight", 1):sync("fwd_post", "reduce_scatter", { axis = 1 }):sync("bwd_params", "all_reduce", { params = { "bias" } })
  layer["attention.self.key"]:shard("weight", 0):shard("bias", 0)
  layer["attention.self.query"]:shard("weight", 0):shard("bias", 0)
  layer["attention.self.value"]:shard("weight", 0):shard("bias", 0)
  layer["intermediate.dense"]:sync("bwd_params", "all_reduce") -- whole weights on this rank's tokens
  layer["output.dense"]:sync("bwd_params", "all_reduce") -- whole weights on this rank's tokens
  layer["attention.self"]:sync("fwd_pre", "all_gather", { axis = 1, grad = "reduce_scatter" })
  layer["attention.output.LayerNorm"]:sync("bwd_params", "all_reduce")
  layer["output.LayerNorm"]:sync("bwd_params", "all_reduce")
  layer["attention.output.dropout"]:fork_rng()
  layer["attention.self.dropout"]:fork_rng()
  layer["output.dropout"]:fork_rng()
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
  for _, note in ipairs(require("slapo.schedules.bert").schedule(s, { checkpoint = plan.checkpoint,
    layer = shard_layer })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  -- each layer, then the rest at the root (FSDP2's order)
  local options = { group = layout.dp_group, reshard_after_forward = plan.reshard_after_forward }
  for _, list in ipairs({ "bert.encoder.layer" }) do
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
