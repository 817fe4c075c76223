-- slapo-lua plan: Mixtral-8x7B-v0.1 on 8 x 8 NVIDIA H100 80GB HBM3, batch 256 x seq 4096
-- Run it: slapo-lua run --nproc 64 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 2 x dp 8 x pp 4 (6+8+9+9), ep 4, 32 micro                        2.7437 s   71.13 GiB  picked, 0% slower
--   tp 1 x dp 64, ep 4, checkpoint, zero-2                              2.7424 s   56.11 GiB  the planner's choice
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
--
-- The chosen pipeline, stage by stage (micro-batch seconds, GiB per rank):
--   stage 0: layers 0..5, 0.0510 s, 66.23 GiB
--   stage 1: layers 6..13, 0.0676 s, 71.13 GiB
--   stage 2: layers 14..22, 0.0759 s, 62.16 GiB
--   stage 3: layers 23..31, 0.0766 s, 45.64 GiB

local plan = {
  model = "Mixtral-8x7B-v0.1",  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 2,           -- tensor parallel ranks in every stage (Megatron layout from slapo.schedules.mixtral)
  dp = 8,           -- data parallel replicas of the pipeline
  ep = 4,           -- expert parallelism: each layer's experts spread over ep replicas of its stage (shard_experts)
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = false,  -- ZeRO-3: each layer's weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = true,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  stages = {        -- pipeline stages in order: how many layers each holds, and whether they are recomputed
    { layers = 6, checkpoint = false },
    { layers = 8, checkpoint = false },
    { layers = 9, checkpoint = false },
    { layers = 9, checkpoint = false },
  },
  micro_batches = 32,  -- 1F1B: each replica's batch is cut into this many
  sequence = false,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 256, seq = 4096, steps = 2, lr = 1e-4,
  dtype = "bfloat16",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

local pp = #plan.stages
assert(not (plan.zero and plan.fully_shard), "plan: zero (ZeRO-1) and fully_shard (ZeRO-3) are one or the other")
assert(plan.ep == 1 or not (plan.zero or plan.fully_shard), "plan: ep > 1 in pipeline stages runs plain "
  .. "replicas (zero and fully_shard beside spread experts in stages are untested)")
assert(slapo.dist.world_size() == plan.tp * plan.dp * pp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp * pp, plan.tp * plan.dp * pp))
local parallel = require("slapo.parallel")
local layout = parallel.layout({ tp = plan.tp, pp = pp, ep = plan.ep })
local replica_batch = math.floor(plan.batch / plan.dp)
assert(replica_batch * plan.dp == plan.batch and replica_batch % plan.micro_batches == 0,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))


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

local function make_schedule()
  slapo.manual_seed(0)
  local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
    or slapo.models.build(plan.model)
  return slapo.create_schedule(model, { group = layout.tp_group }), slapo.models.config(model).vocab_size
end

-- the tensor parallelism (over this rank's tp group), then each stage's checkpointing and the cuts
local function apply(s)
  for _, note in ipairs(require("slapo.schedules.mixtral").schedule(s, { checkpoint = 0, layer = shard_layer,
    ep_group = plan.ep > 1 and layout.ep_group or nil })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  local layers, placed = s["model.layers"]:children(), 0
  for i, stage in ipairs(plan.stages) do
    for l = placed + 1, placed + stage.layers do
      if stage.checkpoint then layers[l]:checkpoint() end
      -- fully sharded over the replicas of its stage
      if plan.fully_shard and plan.dp > 1 then
        layers[l]:fully_shard({ group = layout.dp_group, reshard_after_forward = plan.reshard_after_forward })
      end
    end
    sequence_parallel(layers, placed + 1, placed + stage.layers)
    placed = placed + stage.layers
    if i < #plan.stages then layers[placed]:cut_pipeline_stage() end
  end
  assert(placed == #layers, ("plan.stages hold %d layers; the model has %d"):format(placed, #layers))
end

-- the pipeline is checked against the unscheduled model (loss and gradients) before training;
-- a verified pipeline keeps only its stage's weights, so training builds the model again
phase(("building the model on %d ranks, %d stages"):format(slapo.dist.world_size(), pp))
local sch, vocab = make_schedule()
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, { replica_batch, plan.seq })
phase("checking the pipeline against the unscheduled model: loss and gradients")
local report = slapo.verify(sch, { example }, { pipeline = { group = layout.pp_group,
  micro_batches = plan.micro_batches } }, apply)
if slapo.dist.rank() == 0 then
  print(("verify: the pipeline's loss and %d gradients match the unscheduled model"):format(report.gradients))
end
sch = make_schedule()
apply(sch)
local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = plan.micro_batches,
  schedule = "1f1b", dp_group = not plan.zero and layout.dp_group or nil,
  expert_dp_group = plan.ep > 1 and layout.expert_dp_group or nil } })
collectgarbage()  -- the verified copies go before memory is measured
-- tensor memory per rank: the stage's weights, and the most the steps held on top (gradients, the
-- optimizer's state, activations). The rows are random; to train on text, give
-- data = { tokens = "corpus.tokens", batch = plan.batch, seq = plan.seq } (slapo-lua tokenize)
phase(("training %d steps"):format(plan.steps))
local peak_mib, result = slapo.peak_tensor_mib(slapo.train, {
  model = pipe, layout = layout, optimizer = plan.zero and "zero_adamw" or "adamw",
  data = { vocab = vocab, batch = replica_batch, seq = plan.seq },
  steps = plan.steps, lr = plan.lr, autocast = plan.dtype == "bfloat16" and "bf16" or nil,
})
local held = slapo.dist.all_gather(slapo.tensor({ pipe:num_params() * 4 / 2 ^ 20 + peak_mib })):tolist()
local fullest = math.max(unpack(held))
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f, %.4f s/step, %.0f MiB of tensors on the fullest rank"):format(plan.steps,
    result.final_loss, result.step_s or 0, fullest))
end
