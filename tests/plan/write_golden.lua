-- The plan scripts the planner writes, and autoshard's schedules, for a fixed set of cases: written
-- into the directory arg[1], one file per case. tests/cli/test_plan_golden.sh compares them with
-- tests/plan/golden/, so a change to how plans are written shows as a diff someone reads.
-- Cluster profiles are the repository's (h100) or tests/plan/pipeline_friendly.json: nothing
-- measured on the machine running it.
local util = require("slapo.util")
local dir = assert(arg[1], "usage: slapo-lua run tests/plan/write_golden.lua OUT_DIR")
local here = debug.getinfo(1, "S").source:sub(2):match("(.*)/") or "."
local slow = here .. "/pipeline_friendly.json"  -- slow matmuls and links (hiding nothing): pipelines pay
local small = { n_embd = 64, n_layer = 4, n_head = 4, vocab_size = 2048, n_positions = 64 }

local plans = {
  { "gpt2_1x8_h100", "gpt2", { cluster = "1x8:h100", batch = 16, seq = 1024 } },
  { "gpt2_1x8_h100_tp2", "gpt2", { cluster = "1x8:h100", batch = 16, seq = 1024, pick = "tp 2 x dp 4, zero-1" } },
  { "gpt2_1x8_h100_tp2_sequence", "gpt2",
    { cluster = "1x8:h100", batch = 16, seq = 1024, pick = "tp 2 x dp 4, sequence, zero-1" } },
  { "gpt2_1x8_h100_megatron", "gpt2",
    { cluster = "1x8:h100", batch = 16, seq = 1024, layer_costs = "megatron", pick = "tp 2 x dp 4" } },
  { "tinyllama_2x8_h100_bf16", "TinyLlama-1.1B", { cluster = "2x8:h100", batch = 64, seq = 2048, dtype = "bfloat16" } },
  { "bert_large_1x4_h100_bf16", "bert-large-uncased",
    { cluster = "1x4:h100", batch = 32, seq = 512, dtype = "bfloat16" } },
  { "llama7b_4x8_h100_bf16", "llama-7b", { cluster = "4x8:h100", batch = 128, seq = 2048, dtype = "bfloat16" } },
  { "gpt3_6.7b_2x8_h100_bf16", "gpt3-6.7b", { cluster = "2x8:h100", batch = 64, seq = 2048, dtype = "bfloat16" } },
  -- a mixture of experts: expert parallelism in the plan table, as a knob, in the layout and the schedule
  { "mixtral_8x7b_8x8_h100_bf16", "Mixtral-8x7B-v0.1",
    { cluster = "8x8:h100", batch = 256, seq = 4096, dtype = "bfloat16" } },
  -- its pipeline from the inter-op program: the experts spread over ep replicas of every stage
  { "mixtral_8x7b_8x8_h100_bf16_pipeline", "Mixtral-8x7B-v0.1",
    { cluster = "8x8:h100", batch = 256, seq = 4096, dtype = "bfloat16", pick = "inter-op" } },
  -- long sequences: context parallelism in the plan table, as a knob, in the layout and the schedule
  { "llama7b_8x8_h100_bf16_128k", "llama-7b", { cluster = "8x8:h100", batch = 16, seq = 131072, dtype = "bfloat16" } },
  { "small_pipeline_1x4", small, { cluster = "1x4:" .. slow, batch = 8, seq = 32, pick = "inter-op" } },
  { "small_meshes_1x4", small, { cluster = "1x4:" .. slow, batch = 8, seq = 32 } },
  { "small_meshes_1x3", small, { cluster = "1x3:" .. slow, batch = 12, seq = 32 } },
  { "small_bf16_pipeline", small, { cluster = "1x2:h100", batch = 8, seq = 32, dtype = "bfloat16",
    layer_costs = "megatron", pick = "tp 1 x dp 1 x pp 2 (2+2), 1 micro" } },
}

local autoshards = {
  { "autoshard_gpt2", "gpt2", {}, { ranks = 2, batch = 8, seq = 512 } },
  { "autoshard_gpt2_sequence", "gpt2", {}, { ranks = 2, batch = 8, seq = 1024, sequence = true } },
  { "autoshard_bert_mesh_zero", "bert", {}, { ranks = 2, dp = 4, batch = 8, seq = 128, zero = true } },
  { "autoshard_llama_volume", "llama", {}, { ranks = 2, batch = 8, seq = 1024, sequence = true, objective = "volume" } },
}
local wide = {
  gpt2 = { { n_embd = 4096, n_layer = 1, n_head = 32, vocab_size = 64, n_positions = 16 }, "transformer.h.0" },
  bert = { { hidden_size = 4096, num_hidden_layers = 1, num_attention_heads = 32, intermediate_size = 16384,
    vocab_size = 64, max_position_embeddings = 16 }, "bert.encoder.layer.0" },
  llama = { { hidden_size = 4096, num_hidden_layers = 1, num_attention_heads = 32, num_key_value_heads = 8,
    intermediate_size = 11008, vocab_size = 64 }, "model.layers.0" },
}

for _, case in ipairs(plans) do
  local name, model, opts = unpack(case)
  opts.steps = 2
  local plan = slapo.plan(type(model) == "table" and slapo.models.gpt2(model) or model, opts)
  util.write_file(dir .. "/" .. name .. ".lua", plan.source)
end
for _, case in ipairs(autoshards) do
  local name, family, _, opts = unpack(case)
  local config, layer = unpack(wide[family])
  local model = slapo.models[family](config, { init = false })
  slapo.no_grad(function() model(slapo.randint(0, 64, { 1, 13 })) end)  -- the layer's inputs, for the trace
  local plan = slapo.autoshard(slapo.create_schedule(model)[layer], opts)
  util.write_file(dir .. "/" .. name .. ".lua", plan.source)
end
print(("wrote %d plan scripts and %d autoshard schedules into %s"):format(#plans, #autoshards, dir))
