-- slapo-lua plan: gpt2 on 1 x 4 pipeline-friendly, batch 8 x seq 32
-- Run it: slapo-lua run --nproc 4 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   tp 1 x dp 2 x pp 2 (3+1), 4 micro                       0.0067 s    0.01 GiB  picked, 6% slower
--   pp 3 on tp x dp 1x1,1x1,2x1s (1+2+1 layers), 8 micro    0.0063 s    0.00 GiB  the planner's choice
--   tp 2 x dp 2                                             0.0069 s    0.01 GiB  11% slower
--   tp 1 x dp 2 x pp 2 (2+2), 4 micro                       0.0069 s    0.00 GiB  11% slower
--   tp 4 x dp 1, sequence                                   0.0071 s    0.01 GiB  14% slower
--   tp 2 x dp 2, sequence                                   0.0072 s    0.01 GiB  15% slower
--   tp 2 x dp 2, zero-2                                     0.0073 s    0.01 GiB  17% slower
--   tp 1 x dp 4                                             0.0074 s    0.01 GiB  18% slower
--   tp 1 x dp 4, 2 micro                                    0.0074 s    0.01 GiB  18% slower
--   tp 1 x dp 2 x pp 2 (2+2), 2 micro                       0.0075 s    0.01 GiB  19% slower
--   tp 2 x dp 1 x pp 2 (2+2), 2 micro, sequence             0.0076 s    0.00 GiB  21% slower
--   tp 2 x dp 2, sequence, zero-2                           0.0076 s    0.00 GiB  22% slower
--   tp 2 x dp 1 x pp 2 (2+2), 4 micro, sequence             0.0077 s    0.00 GiB  23% slower
--   tp 2 x dp 2, 2 micro                                    0.0077 s    0.00 GiB  23% slower
--   tp 1 x dp 2 x pp 2 (2c+2c), 4 micro                     0.0078 s    0.00 GiB  24% slower
--   tp 2 x dp 2, zero-1                                     0.0078 s    0.01 GiB  24% slower
--   tp 1 x dp 2 x pp 2 (2+2), 4 micro, zero-1               0.0079 s    0.00 GiB  26% slower
--   tp 1 x dp 1 x pp 4 (1+1+1+1), 8 micro                   0.0079 s    0.00 GiB  27% slower
--   tp 2 x dp 2, sequence, zero-1                           0.0079 s    0.00 GiB  27% slower
--   tp 1 x dp 4, checkpoint                                 0.0081 s    0.01 GiB  29% slower
--   ... and 110 more
--   pp 3 on tp x dp 1x1,1x1,2x1s (1+2+1 layers), 8 micro    0.0063 s    0.00 GiB  the same as the chosen plan
--
-- The chosen pipeline, stage by stage (micro-batch seconds, GiB per rank):
--   stage 0: layers 0..2, 0.0009 s, 0.01 GiB
--   stage 1: layers 3..3, 0.0008 s, 0.00 GiB

local plan = {
  model = { ["activation_function"] = "gelu_new", ["architectures"] = { "GPT2LMHeadModel" }, ["attn_pdrop"] = 0.1, ["embd_pdrop"] = 0.1, ["initializer_range"] = 0.02, ["layer_norm_epsilon"] = 1e-05, ["model_type"] = "gpt2", ["n_embd"] = 64, ["n_head"] = 4, ["n_layer"] = 4, ["n_positions"] = 64, ["resid_pdrop"] = 0.1, ["tie_word_embeddings"] = true, ["vocab_size"] = 2048 },  -- a preset name, a Hugging Face directory or a table of config fields
  tp = 1,           -- tensor parallel ranks in every stage (Megatron layout from slapo.schedules.gpt2)
  dp = 2,           -- data parallel replicas of the pipeline
  zero = false,     -- ZeRO-1: AdamW's moments sharded over the data-parallel ranks
  fully_shard = false,  -- ZeRO-3: each layer's weights, gradients and AdamW state sharded over the data-parallel ranks
  reshard_after_forward = true,  -- false: each layer's weights kept whole from forward to backward (ZeRO-2)
  stages = {        -- pipeline stages in order: how many layers each holds, and whether they are recomputed
    { layers = 3, checkpoint = false },
    { layers = 1, checkpoint = false },
  },
  micro_batches = 4,  -- 1F1B: each replica's batch is cut into this many
  sequence = false,  -- sequence parallelism: each layer's tokens split over the tp ranks between its projections
  batch = 8, seq = 32, steps = 2, lr = 1e-4,
  dtype = "float32",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

local pp = #plan.stages
assert(not (plan.zero and plan.fully_shard), "plan: zero (ZeRO-1) and fully_shard (ZeRO-3) are one or the other")
assert(slapo.dist.world_size() == plan.tp * plan.dp * pp,
  ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(plan.tp * plan.dp * pp, plan.tp * plan.dp * pp))
local parallel = require("slapo.parallel")
local layout = parallel.layout({ tp = plan.tp, pp = pp })
local replica_batch = math.floor(plan.batch / plan.dp)
assert(replica_batch * plan.dp == plan.batch and replica_batch % plan.micro_batches == 0,
  ("plan: batch %d does not split into %d replicas x %d micro-batches"):format(plan.batch, plan.dp, plan.micro_batches))


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

local function make_schedule()
  slapo.manual_seed(0)
  local model = type(plan.model) == "string" and plan.model:find("/") and slapo.models.from_pretrained(plan.model)
    or slapo.models.build(plan.model)
  return slapo.create_schedule(model, { group = layout.tp_group }), slapo.models.config(model).vocab_size
end

-- the tensor parallelism (over this rank's tp group), then each stage's checkpointing and the cuts
local function apply(s)
  for _, note in ipairs(require("slapo.schedules.gpt2").schedule(s, { checkpoint = 0, layer = shard_layer })) do
    if slapo.dist.rank() == 0 then print("note: " .. note) end
  end
  local layers, placed = s["transformer.h"]:children(), 0
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
  schedule = "1f1b", dp_group = not plan.zero and layout.dp_group or nil } })
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
