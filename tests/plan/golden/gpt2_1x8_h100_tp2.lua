-- slapo-lua plan: gpt2 on 1 x 8 NVIDIA H100 80GB HBM3, batch 16 x seq 1024
-- Run it: slapo-lua run --nproc 8 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 2 x dp 4, zero-1                                     0.0623 s    6.76 GiB  picked, 39% slower
--   tp 1 x dp 8, zero-2                                     0.0448 s    5.60 GiB  the planner's choice
--   tp 1 x dp 8, fully sharded                              0.0453 s    5.25 GiB  1% slower
--   tp 1 x dp 8, 2 micro, zero-2                            0.0457 s    3.22 GiB  2% slower
--   tp 1 x dp 8, 2 micro, fully sharded                     0.0465 s    2.87 GiB  4% slower
--   tp 1 x dp 8, zero-1                                     0.0470 s    5.95 GiB  5% slower
--   tp 1 x dp 8, 2 micro, zero-1                            0.0470 s    3.57 GiB  5% slower
--   tp 1 x dp 8                                             0.0470 s    6.76 GiB  5% slower
--   tp 1 x dp 8, 2 micro                                    0.0470 s    4.37 GiB  5% slower
--   tp 1 x dp 8, checkpoint, zero-2                         0.0556 s    2.00 GiB  24% slower
--   tp 1 x dp 8, checkpoint, fully sharded                  0.0561 s    1.65 GiB  25% slower
--   tp 1 x dp 8, 2 micro, checkpoint, zero-2                0.0565 s    1.41 GiB  26% slower
--   tp 1 x dp 8, 2 micro, checkpoint, fully sharded         0.0573 s    1.06 GiB  28% slower
--   tp 1 x dp 8, checkpoint, zero-1                         0.0578 s    2.35 GiB  29% slower
--   tp 1 x dp 8, 2 micro, checkpoint, zero-1                0.0578 s    1.76 GiB  29% slower
--   tp 1 x dp 8, checkpoint                                 0.0578 s    3.16 GiB  29% slower
--   tp 1 x dp 8, 2 micro, checkpoint                        0.0578 s    2.57 GiB  29% slower
--   tp 2 x dp 4, zero-2                                     0.0612 s    6.56 GiB  37% slower
--   tp 2 x dp 4, sequence, zero-2                           0.0612 s    6.24 GiB  37% slower
--   tp 2 x dp 4, fully sharded                              0.0615 s    6.36 GiB  37% slower
--   ... and 278 more
--   tp 1 x dp 8, zero-1                                     0.0470 s    5.95 GiB  5% slower (a submesh per stage)

local plan = {
  model = "gpt2",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 2,           -- tensor parallel ranks (Megatron layout from slapo.schedules.gpt2)
  dp = 4,           -- data parallel replicas
  checkpoint = 0.0,  -- fraction of layers whose activations are recomputed in backward
  zero = true,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = false,  -- ZeRO-3: weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = true,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  micro_batches = 1,  -- each replica's batch in this many parts, their gradients accumulated
  sequence = false,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 16, seq = 1024, steps = 2, lr = 1e-4,
  dtype = "float32",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

-- `slapo-lua tune plan.lua --nproc 8` runs the plans above as knobs, the best predicted first
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
plan.micro_batches = knob("micro_batches", { 1, 2, 4, 8 }, plan.micro_batches)
local micro_batch = math.floor(plan.batch / plan.dp / plan.micro_batches)
assert(micro_batch >= 1 and micro_batch * plan.dp * plan.micro_batches == plan.batch,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))
slapo.predict({
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0622817, peak_gib = 6.76 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0448459, peak_gib = 5.6 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0452712, peak_gib = 5.25 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0456964, peak_gib = 3.22 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0465469, peak_gib = 2.87 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0469828, peak_gib = 5.95 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0469828, peak_gib = 3.57 },
  { tp = 1, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0470094, peak_gib = 6.76 },
  { tp = 1, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0470094, peak_gib = 4.37 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0556327, peak_gib = 2 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0560579, peak_gib = 1.65 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0564832, peak_gib = 1.41 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0573337, peak_gib = 1.06 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0577696, peak_gib = 2.35 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0577696, peak_gib = 1.76 },
  { tp = 1, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0577961, peak_gib = 3.16 },
  { tp = 1, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0577961, peak_gib = 2.57 },
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0612372, peak_gib = 6.56 },
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0615481, peak_gib = 6.36 },
  { tp = 2, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0623013, peak_gib = 7.22 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.062339, peak_gib = 3.63 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0627617, peak_gib = 3.83 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0627813, peak_gib = 4.28 },
  { tp = 2, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0629608, peak_gib = 3.43 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0637217, peak_gib = 2.36 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0637413, peak_gib = 2.82 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0645426, peak_gib = 2.16 },
  { tp = 2, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0657863, peak_gib = 1.96 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0740227, peak_gib = 2.73 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0743336, peak_gib = 2.53 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0750672, peak_gib = 2.93 },
  { tp = 2, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0750868, peak_gib = 3.39 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0753645, peak_gib = 1.72 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0757872, peak_gib = 1.92 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0758068, peak_gib = 2.37 },
  { tp = 2, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0759863, peak_gib = 1.52 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0772272, peak_gib = 1.41 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0772468, peak_gib = 1.86 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0780481, peak_gib = 1.21 },
  { tp = 2, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0792918, peak_gib = 1.01 },
  { tp = 4, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0825623, peak_gib = 8.76 },
  { tp = 4, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0827517, peak_gib = 8.66 },
  { tp = 4, micro_batches = 1, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0829962, peak_gib = 8.86 },
  { tp = 4, micro_batches = 1, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0830083, peak_gib = 9.08 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0895269, peak_gib = 4.74 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.089582, peak_gib = 4.83 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.089594, peak_gib = 5.06 },
  { tp = 4, micro_batches = 2, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0899057, peak_gib = 4.64 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.092462, peak_gib = 2.82 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.092474, peak_gib = 3.05 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0931645, peak_gib = 2.73 },
  { tp = 4, micro_batches = 4, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0939221, peak_gib = 2.63 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.0960404, peak_gib = 4.48 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.0962298, peak_gib = 4.38 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.0964743, peak_gib = 4.58 },
  { tp = 4, micro_batches = 1, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.0964864, peak_gib = 4.8 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.098222, peak_gib = 1.82 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.098234, peak_gib = 2.04 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.10044, peak_gib = 1.72 },
  { tp = 4, micro_batches = 8, checkpoint = 0.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.101955, peak_gib = 1.62 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.104855, peak_gib = 2.6 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.10491, peak_gib = 2.69 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.104922, peak_gib = 2.92 },
  { tp = 4, micro_batches = 2, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.105233, peak_gib = 2.5 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.10923, peak_gib = 1.75 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.109242, peak_gib = 1.98 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.109932, peak_gib = 1.66 },
  { tp = 4, micro_batches = 4, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.11069, peak_gib = 1.56 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = true, fully_shard = false, reshard_after_forward = true, step_s = 0.11787, peak_gib = 1.28 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = false, reshard_after_forward = true, step_s = 0.117882, peak_gib = 1.51 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = false, step_s = 0.120087, peak_gib = 1.18 },
  { tp = 4, micro_batches = 8, checkpoint = 1.0, zero = false, fully_shard = true, reshard_after_forward = true, step_s = 0.121603, peak_gib = 1.09 },
})

assert(slapo.dist.world_size() == plan.tp * plan.dp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp, plan.tp * plan.dp))
local layout = require("slapo.parallel").layout({ tp = plan.tp })
slapo.manual_seed(0)
local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
  or slapo.models.build(plan.model)
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local vocab = slapo.models.config(model).vocab_size

-- Each layer's tensor parallelism, from the intra-op pass: the cbc ILP on one layer for 2 x 4 ranks (tp x dp), 4 of its 4 projections sharded (76 variables, 120 constraints).
-- The predictions above price this layout. Edit a line (keep a projection whole, say) and run again;
-- `local shard_layer = nil` in its place runs the reference schedule's (Megatron's) layout.
local function shard_layer(layer)
  layer["attn.c_attn"]:shard("weight", 1, { groups = 3 }):shard("bias", 0, { groups = 3 }):sync("bwd_post", "all_reduce")
  layer["attn.c_proj"]:shard("weight", 0):sync("fwd_post", "all_reduce")
  layer["mlp.c_fc"]:shard("weight", 1):shard("bias", 0):sync("bwd_post", "all_reduce")
  layer["mlp.c_proj"]:shard("weight", 0):sync("fwd_post", "all_reduce")
  layer["attn.attn_dropout"]:fork_rng()
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
  for _, note in ipairs(require("slapo.schedules.gpt2").schedule(s, { checkpoint = plan.checkpoint,
    layer = shard_layer })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  -- each layer, then the rest at the root (FSDP2's order)
  local options = { group = layout.dp_group, reshard_after_forward = plan.reshard_after_forward }
  for _, list in ipairs({ "transformer.h" }) do
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
