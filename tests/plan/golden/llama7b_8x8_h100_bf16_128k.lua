-- slapo-lua plan: llama-7b on 8 x 8 NVIDIA H100 80GB HBM3, batch 16 x seq 131072
-- Run it: slapo-lua run --nproc 64 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 4 x dp 16, cp 4, 4 micro                             7.8639 s   60.37 GiB  chosen
--   tp 8 x dp 8, cp 2, 4 micro                              8.5219 s   48.22 GiB  8% slower
--   tp 8 x dp 8, cp 4, 4 micro                              8.5219 s   48.22 GiB  8% slower
--   tp 8 x dp 8, cp 4, 8 micro                              8.5578 s   30.38 GiB  9% slower
--   tp 2 x dp 32, cp 4, 2 micro, checkpoint                10.1775 s   62.75 GiB  29% slower
--   tp 4 x dp 16, cp 8, 4 micro                            10.4649 s   60.37 GiB  33% slower
--   tp 4 x dp 16, cp 2, checkpoint                         10.4871 s   65.29 GiB  33% slower
--   tp 4 x dp 16, cp 4, checkpoint                         10.4871 s   65.29 GiB  33% slower
--   tp 4 x dp 16, cp 2, 2 micro, checkpoint                10.4928 s   45.20 GiB  33% slower
--   tp 4 x dp 16, cp 4, 2 micro, checkpoint                10.4928 s   45.20 GiB  33% slower
--   tp 4 x dp 16, cp 8, 8 micro                            10.4982 s   42.74 GiB  33% slower
--   tp 4 x dp 16, cp 4, 4 micro, checkpoint                10.5044 s   35.15 GiB  34% slower
--   tp 8 x dp 8, cp 8, 4 micro                             11.1230 s   48.22 GiB  41% slower
--   tp 8 x dp 8, cp 8, 8 micro                             11.1767 s   30.38 GiB  42% slower
--   tp 8 x dp 8, cp 8, 16 micro                            11.2843 s   21.47 GiB  43% slower
--   tp 8 x dp 8, cp 2, 2 micro, checkpoint                 11.4853 s   48.67 GiB  46% slower
--   tp 8 x dp 8, cp 4, 2 micro, checkpoint                 11.4853 s   48.67 GiB  46% slower
--   tp 8 x dp 8, cp 2, 4 micro, checkpoint                 11.5121 s   30.61 GiB  46% slower
--   tp 8 x dp 8, cp 4, 4 micro, checkpoint                 11.5121 s   30.61 GiB  46% slower
--   tp 8 x dp 8, cp 4, 8 micro, checkpoint                 11.5659 s   21.58 GiB  47% slower
--   ... and 696 more

local plan = {
  model = "llama-7b",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 4,           -- tensor parallel ranks (Megatron layout from slapo.schedules.llama)
  dp = 16,           -- data parallel replicas
  cp = 4,           -- context parallelism: each sequence split over cp replicas (ring attention)
  checkpoint = 0.0,  -- fraction of layers whose activations are recomputed in backward
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = false,  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = true,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
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
plan.micro_batches = knob("micro_batches", { 1, 2, 4, 8, 16 }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / (plan.dp / plan.cp) / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * (plan.dp / plan.cp) * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, (plan.dp / plan.cp), plan.micro_batches))
slapo.predict({
  { tp = 4, cp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 7.86388, peak_gib = 60.4 },
  { tp = 8, cp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.52193, peak_gib = 48.2 },
  { tp = 8, cp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.52193, peak_gib = 48.2 },
  { tp = 8, cp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 8.55777, peak_gib = 30.4 },
  { tp = 2, cp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.1775, peak_gib = 62.8 },
  { tp = 4, cp = 8, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4649, peak_gib = 60.4 },
  { tp = 4, cp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4871, peak_gib = 65.3 },
  { tp = 4, cp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4871, peak_gib = 65.3 },
  { tp = 4, cp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4928, peak_gib = 45.2 },
  { tp = 4, cp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4928, peak_gib = 45.2 },
  { tp = 4, cp = 8, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.4982, peak_gib = 42.7 },
  { tp = 4, cp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 10.5044, peak_gib = 35.1 },
  { tp = 8, cp = 8, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.123, peak_gib = 48.2 },
  { tp = 8, cp = 8, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.1767, peak_gib = 30.4 },
  { tp = 8, cp = 8, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.2843, peak_gib = 21.5 },
  { tp = 8, cp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.4853, peak_gib = 48.7 },
  { tp = 8, cp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.4853, peak_gib = 48.7 },
  { tp = 8, cp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.5121, peak_gib = 30.6 },
  { tp = 8, cp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.5121, peak_gib = 30.6 },
  { tp = 8, cp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 11.5659, peak_gib = 21.6 },
  { tp = 2, cp = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.6351, peak_gib = 62.8 },
  { tp = 2, cp = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.6524, peak_gib = 62.8 },
  { tp = 4, cp = 8, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.938, peak_gib = 65.3 },
  { tp = 4, cp = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.9505, peak_gib = 45.2 },
  { tp = 4, cp = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 13.9754, peak_gib = 35.1 },
  { tp = 4, cp = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 14.0253, peak_gib = 31.4 },
  { tp = 8, cp = 8, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 14.9429, peak_gib = 48.7 },
  { tp = 8, cp = 8, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 14.9832, peak_gib = 30.6 },
  { tp = 8, cp = 8, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 15.0638, peak_gib = 21.6 },
  { tp = 8, cp = 8, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 15.2251, peak_gib = 17.1 },
  { tp = 2, cp = 16, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.1617, peak_gib = 67.7 },
  { tp = 4, cp = 16, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.4413, peak_gib = 60.4 },
  { tp = 4, cp = 16, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.4436, peak_gib = 33.9 },
  { tp = 4, cp = 16, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 18.495, peak_gib = 42.7 },
  { tp = 2, cp = 16, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.1464, peak_gib = 62.8 },
  { tp = 2, cp = 16, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.2583, peak_gib = 62.8 },
  { tp = 2, cp = 16, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.2909, peak_gib = 62.8 },
  { tp = 4, cp = 16, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.5535, peak_gib = 65.3 },
  { tp = 4, cp = 16, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.5736, peak_gib = 45.2 },
  { tp = 4, cp = 16, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.6139, peak_gib = 35.1 },
  { tp = 4, cp = 16, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.645, peak_gib = 31.4 },
  { tp = 4, cp = 16, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 24.6946, peak_gib = 31.4 },
  { tp = 2, cp = 32, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 34.5291, peak_gib = 67.7 },
  { tp = 2, cp = 32, micro_batches = 16, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 34.7649, peak_gib = 62.8 },
  { tp = 2, cp = 32, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 45.9833, peak_gib = 62.8 },
  { tp = 2, cp = 32, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 46.003, peak_gib = 62.8 },
  { tp = 2, cp = 32, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 46.0663, peak_gib = 62.8 },
  { tp = 2, cp = 32, micro_batches = 16, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 46.326, peak_gib = 62.8 },
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
  if plan.cp > 1 then s:context_parallel({ group = layout.cp_group }) end
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
local fullest = math.max(unpack(slapo.dist.all_gather(slapo.tensor({ built:num_params() * 4 / 2 ^ 20 + peak_mib })):tolist()))
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f, %.4f s/step, %.0f MiB of tensors on the fullest rank"):format(plan.steps,
    result.final_loss, result.step_s or 0, fullest))
end
