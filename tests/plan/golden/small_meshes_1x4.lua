-- slapo-lua plan: gpt2 on 1 x 4 pipeline-friendly, batch 8 x seq 32
-- Run it: slapo-lua run --nproc 4 plan.lua   (edit the plan table and run again)
--
-- Predicted (step seconds, GiB per rank), the best plans considered:
--   pp 3 on tp x dp 1x1,1x1,2x1s (1+2+1 layers), 8 micro    0.0063 s    0.00 GiB  chosen
--   tp 1 x dp 2 x pp 2 (3+1), 4 micro                       0.0067 s    0.01 GiB  6% slower
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
-- The chosen pipeline, stage by stage, each on ranks of its own (micro-batch seconds, GiB per rank):
--   stage 0: layers 0..0 on tp 1 x dp 1 (ranks 0..0), 0.0004 s, 0.00 GiB
--   stage 1: layers 1..2 on tp 1 x dp 1 (ranks 1..1), 0.0006 s, 0.00 GiB
--   stage 2: layers 3..3 on tp 2 x dp 1 (ranks 2..3), sequence parallel, 0.0007 s, 0.00 GiB

local plan = {
  model = { ["activation_function"] = "gelu_new", ["architectures"] = { "GPT2LMHeadModel" }, ["attn_pdrop"] = 0.1, ["embd_pdrop"] = 0.1, ["initializer_range"] = 0.02, ["layer_norm_epsilon"] = 1e-05, ["model_type"] = "gpt2", ["n_embd"] = 64, ["n_head"] = 4, ["n_layer"] = 4, ["n_positions"] = 64, ["resid_pdrop"] = 0.1, ["tie_word_embeddings"] = true, ["vocab_size"] = 2048 },  -- a preset name, a Hugging Face directory or a table of config fields
  -- pipeline stages in order, each on ranks of its own: how many layers it holds, its mesh (tp ranks
  -- x dp replicas), whether its layers are recomputed, ZeRO-1 over its replicas, sequence parallelism
  stages = {
    { layers = 1, tp = 1, dp = 1, checkpoint = false, zero = false, sequence = false },
    { layers = 2, tp = 1, dp = 1, checkpoint = false, zero = false, sequence = false },
    { layers = 1, tp = 2, dp = 1, checkpoint = false, zero = false, sequence = true },
  },
  micro_batches = 8,  -- 1F1B: the batch is cut into this many; each stage's replicas split every one
  batch = 8, seq = 32, steps = 2, lr = 1e-4,
  dtype = "float32",  -- "bfloat16": bf16 autocast (float32 weights and AdamW state, bf16 matmuls)
}

local meshes, ranks = {}, 0
for i, stage in ipairs(plan.stages) do
  meshes[i] = { tp = stage.tp, dp = stage.dp }
  ranks = ranks + stage.tp * stage.dp
end
assert(slapo.dist.world_size() == ranks, ("this plan needs %d ranks: slapo-lua run --nproc %d"):format(ranks, ranks))
local layout = require("slapo.parallel").stage_layout(meshes)
local mine = plan.stages[layout.stage + 1]  -- this rank's stage
local micro_batch, rows = math.floor(plan.batch / plan.micro_batches), 1  -- rows: the fewest all replicas divide
for i, stage in ipairs(plan.stages) do
  assert(micro_batch * plan.micro_batches == plan.batch and micro_batch % stage.dp == 0,
    ("plan: batch %d does not split into %d micro-batches that stage %d's %d replicas divide"):format(plan.batch,
      plan.micro_batches, i - 1, stage.dp))
  local a, b = rows, stage.dp
  while b > 0 do a, b = b, a % b end
  rows = rows * stage.dp / a
end

-- Each stage mesh's layer layout (tensor parallelism), by tp x dp, from the intra-op pass; the predictions price these.
-- A mesh missing here runs the reference schedule's (Megatron's) layout.
--   2x1: the cbc ILP on one layer for 2 x 1 ranks (tp x dp, its tokens split between projections), 4 of its 4 projections sharded (125 variables, 334 constraints)
local shard_layers = {
  ["2x1, sequence"] = function(layer)
    layer["attn.c_attn"]:shard("weight", 1, { groups = 3 }):shard("bias", 0, { groups = 3 }):sync("fwd_pre", "all_gather", { axis = 1, grad = "reduce_scatter" })
    layer["attn.c_proj"]:shard("weight", 0):sync("fwd_post", "reduce_scatter", { axis = 1 }):sync("bwd_params", "all_reduce", { params = { "bias" } })
    layer["mlp.c_fc"]:sync("bwd_params", "all_reduce") -- whole weights on this rank's tokens
    layer["mlp.c_proj"]:sync("bwd_params", "all_reduce") -- whole weights on this rank's tokens
    layer["ln_1"]:sync("bwd_params", "all_reduce")
    layer["ln_2"]:sync("bwd_params", "all_reduce")
    layer["attn.attn_dropout"]:fork_rng()
    layer["attn.resid_dropout"]:fork_rng()
    layer["mlp.dropout"]:fork_rng()
  end,
}
local shard_layer = shard_layers[("%dx%d%s"):format(mine.tp, mine.dp, mine.sequence and ", sequence" or "")]
if mine.tp > 1 and mine.sequence and not shard_layer then
  error(("plan: stage %d has sequence = true, but no layer layout splits the tokens on tp %d x dp %d: plan again, or "
    .. "set sequence = false"):format(layout.stage, mine.tp, mine.dp))
end
-- sequence parallelism on this rank's mesh: layers first..last take their tokens split over its tp ranks
local function sequence_parallel(layers, first, last)
  if not mine.sequence or mine.tp < 2 then return end
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
    end
    sequence_parallel(layers, placed + 1, placed + stage.layers)
    placed = placed + stage.layers
    if i < #plan.stages then layers[placed]:cut_pipeline_stage() end
  end
  assert(placed == #layers, ("plan.stages hold %d layers; the model has %d"):format(placed, #layers))
end

-- the pipeline is checked against the unscheduled model (loss and gradients) before training, on the
-- fewest rows that every stage's replicas divide; a verified pipeline keeps only its stage's weights,
-- so training builds the model again
local sch, vocab = make_schedule()
slapo.manual_seed(1)
local example = slapo.randint(0, vocab, { plan.micro_batches * rows, plan.seq })
phase("checking the pipeline against the unscheduled model: loss and gradients")
local report = slapo.verify(sch, { example }, { pipeline = { meshes = layout.meshes, dp_group = layout.dp_group,
  micro_batches = plan.micro_batches } }, apply)
if slapo.dist.rank() == 0 then
  print(("verify: the pipeline's loss and %d gradients match the unscheduled model"):format(report.gradients))
end
sch = make_schedule()
apply(sch)
-- each replica's gradients are its rows' part: dp_group sums them, or ZeRO-1's step does
local pipe = slapo.build(sch, { pipeline = { meshes = layout.meshes, micro_batches = plan.micro_batches,
  schedule = "1f1b", dp_group = not mine.zero and layout.dp_group or nil } })
collectgarbage()  -- the verified copies go before memory is measured
-- tensor memory per rank: the stage's weights, and the most the steps held on top (gradients, the
-- optimizer's state, activations). The rows are random; to train on text, give
-- data = { tokens = "corpus.tokens", batch = plan.batch, seq = plan.seq } (slapo-lua tokenize)
phase(("training %d steps"):format(plan.steps))
local peak_mib, result = slapo.peak_tensor_mib(slapo.train, {
  model = pipe, layout = layout, optimizer = mine.zero and "zero_adamw" or "adamw",
  data = { vocab = vocab, batch = plan.batch, seq = plan.seq },
  steps = plan.steps, lr = plan.lr, autocast = plan.dtype == "bfloat16" and "bf16" or nil,
})
local held = slapo.dist.all_gather(slapo.tensor({ pipe:num_params() * 4 / 2 ^ 20 + peak_mib })):tolist()
local fullest = math.max(unpack(held))
if slapo.dist.rank() == 0 then
  print(("plan: %d steps, final loss %.4f, %.4f s/step, %.0f MiB of tensors on the fullest rank"):format(plan.steps,
    result.final_loss, result.step_s or 0, fullest))
end
