-- The reference schedules on 2 ranks equal the unscheduled models in outputs and gathered
-- gradients (eval mode: dropout off), and training steps match the single-rank loss.

-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local configs = {
  gpt2 = { n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16 },
  bert = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64, vocab_size = 64,
    max_position_embeddings = 16 },
  llama = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 64 },
  -- q/k/v biases, tied head, a sliding window on the second layer
  qwen2 = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 64, use_sliding_window = true, sliding_window = 4, max_window_layers = 1 },
  -- a window shorter than the test's sequences on every layer
  mistral = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 64, sliding_window = 4 },
  -- positions after padding_idx 1 (the test's ids hold some 1s: padding)
  roberta = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64, vocab_size = 64,
    max_position_embeddings = 20 },
  -- a 16-wide factorised embedding, 3 layers over one shared group of 2 layers
  albert = { embedding_size = 16, hidden_size = 32, num_hidden_layers = 3, inner_group_num = 2, num_attention_heads = 4,
    intermediate_size = 64, vocab_size = 64, max_position_embeddings = 16, hidden_dropout_prob = 0.1 },
  -- a global and a local layer, the window shorter than the test's sequences
  gpt_neo = { hidden_size = 32, num_layers = 2, num_heads = 4, attention_types = { { { "global", "local" }, 1 } },
    window_size = 4, vocab_size = 64, max_position_embeddings = 16 },
  -- opt-350m's shape: post-norm layers, project_in / project_out around them (kept whole)
  opt = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, ffn_dim = 64, vocab_size = 64,
    max_position_embeddings = 16, word_embed_proj_dim = 16, do_layer_norm_before = false },
  -- relative position buckets fewer than the test's distances, a tied head
  t5 = { d_model = 32, d_kv = 8, d_ff = 64, num_layers = 2, num_decoder_layers = 2, num_heads = 4, vocab_size = 64,
    relative_attention_num_buckets = 8, relative_attention_max_distance = 16 },
  -- t5-v1_1's shape: gated GELU, an untied head, a decoder deeper than the encoder
  t5_gated = { d_model = 32, d_kv = 8, d_ff = 64, num_layers = 1, num_decoder_layers = 2, num_heads = 4, vocab_size = 64,
    relative_attention_num_buckets = 8, relative_attention_max_distance = 16, feed_forward_proj = "gated-gelu",
    tie_word_embeddings = false },
}
-- the zoo's model and the schedule module of each kind, where the kind is a variant's name
local family = { t5_gated = "t5" }

-- 3 AdamW steps of both models in eval mode on one batch: the losses agree to 1e-4.
local function same_loss_curve(ref, model, what)
  ref:eval()
  model:eval()
  local opts = { slapo.optim.adamw(ref, { lr = 1e-2 }), slapo.optim.adamw(model, { lr = 1e-2 }) }
  slapo.manual_seed(9)
  local ids = slapo.randint(0, 64, { 2, 8 })
  for step = 1, 3 do
    local losses = {}
    for i, m in ipairs({ ref, model }) do
      opts[i]:zero_grad()
      local loss = m(ids, { labels = ids })
      loss:backward()
      opts[i]:step()
      losses[i] = loss:item()
    end
    assert(math.abs(losses[1] - losses[2]) < 1e-4 * math.abs(losses[1]),
      ("step %d: loss %.7f on 1 rank, %.7f %s"):format(step, losses[1], losses[2], what))
  end
end

local function build(kind)
  slapo.manual_seed(21)
  return slapo.models[family[kind] or kind](configs[kind])
end

local function schedule_of(kind)
  return require("slapo.schedules." .. (family[kind] or kind))
end

-- what verify calls each model with: an encoder-decoder takes the decoder's tokens too
local function inputs(kind, ids)
  if family[kind] == "t5" or kind == "t5" then
    return { ids, { decoder_input_ids = ids:narrow(1, 0, 6) } }
  end
  return { ids }
end

-- The weights each schedule must split, with the axis Megatron splits: a column-parallel projection
-- its outputs, a row-parallel one its inputs (Linear weights are [out, in], GPT-2's Conv1D [in, out]).
local llama_like = {
  ["model.layers.0.self_attn.q_proj.weight"] = 0, ["model.layers.0.self_attn.k_proj.weight"] = 0,
  ["model.layers.0.self_attn.v_proj.weight"] = 0, ["model.layers.0.self_attn.o_proj.weight"] = 1,
  ["model.layers.1.mlp.gate_proj.weight"] = 0, ["model.layers.1.mlp.up_proj.weight"] = 0,
  ["model.layers.1.mlp.down_proj.weight"] = 1,
}
local sharded = {
  gpt2 = { ["transformer.h.0.attn.c_attn.weight"] = 1, ["transformer.h.0.attn.c_proj.weight"] = 0,
    ["transformer.h.1.mlp.c_fc.weight"] = 1, ["transformer.h.1.mlp.c_proj.weight"] = 0 },
  bert = { ["bert.encoder.layer.0.attention.self.query.weight"] = 0,
    ["bert.encoder.layer.0.attention.self.value.weight"] = 0,
    ["bert.encoder.layer.0.attention.output.dense.weight"] = 1,
    ["bert.encoder.layer.1.intermediate.dense.weight"] = 0, ["bert.encoder.layer.1.output.dense.weight"] = 1 },
  llama = llama_like, qwen2 = llama_like, mistral = llama_like,
  roberta = { ["roberta.encoder.layer.0.attention.self.query.weight"] = 0,
    ["roberta.encoder.layer.0.attention.self.value.weight"] = 0,
    ["roberta.encoder.layer.0.attention.output.dense.weight"] = 1,
    ["roberta.encoder.layer.1.intermediate.dense.weight"] = 0, ["roberta.encoder.layer.1.output.dense.weight"] = 1 },
  albert = { ["albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight"] = 0,
    ["albert.encoder.albert_layer_groups.0.albert_layers.1.attention.dense.weight"] = 1,
    ["albert.encoder.albert_layer_groups.0.albert_layers.1.ffn.weight"] = 0,
    ["albert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output.weight"] = 1 },
  gpt_neo = { ["transformer.h.0.attn.attention.q_proj.weight"] = 0, ["transformer.h.0.attn.attention.k_proj.weight"] = 0,
    ["transformer.h.1.attn.attention.v_proj.weight"] = 0, ["transformer.h.1.attn.attention.out_proj.weight"] = 1,
    ["transformer.h.1.mlp.c_fc.weight"] = 0, ["transformer.h.1.mlp.c_proj.weight"] = 1 },
  opt = { ["model.decoder.layers.0.self_attn.q_proj.weight"] = 0, ["model.decoder.layers.0.self_attn.k_proj.weight"] = 0,
    ["model.decoder.layers.0.self_attn.v_proj.weight"] = 0, ["model.decoder.layers.0.self_attn.out_proj.weight"] = 1,
    ["model.decoder.layers.1.fc1.weight"] = 0, ["model.decoder.layers.1.fc2.weight"] = 1 },
  t5 = { ["encoder.block.0.layer.0.SelfAttention.q.weight"] = 0, ["encoder.block.0.layer.0.SelfAttention.o.weight"] = 1,
    ["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = 1,
    ["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = 1,
    ["decoder.block.1.layer.1.EncDecAttention.k.weight"] = 0, ["decoder.block.1.layer.1.EncDecAttention.o.weight"] = 1,
    ["encoder.block.1.layer.1.DenseReluDense.wi.weight"] = 0, ["decoder.block.1.layer.2.DenseReluDense.wo.weight"] = 1,
    ["shared.weight"] = 0 },
  t5_gated = { ["decoder.block.1.layer.2.DenseReluDense.wi_0.weight"] = 0,
    ["decoder.block.1.layer.2.DenseReluDense.wi_1.weight"] = 0, ["encoder.block.0.layer.1.DenseReluDense.wo.weight"] = 1,
    ["decoder.block.0.layer.1.EncDecAttention.v.weight"] = 0, ["shared.weight"] = 0, ["lm_head.weight"] = 0 },
}

-- Each rank holds 1/world of every weight the schedule must split, along its axis.
local function check_sharded(kind, full, scheduled)
  local world = slapo.dist.world_size()
  local before, after = {}, {}
  for name, p in full:named_parameters() do before[name] = p:size() end
  for name, p in scheduled:named_parameters() do after[name] = p:size() end
  for name, axis in pairs(sharded[kind]) do
    local want = assert(before[name], kind .. " has no parameter " .. name)
    want[axis + 1] = want[axis + 1] / world
    eq(want, after[name], kind .. ": this rank's " .. name)
  end
end

-- GPT-Neo does not scale its attention scores by 1/sqrt(head_dim): float32 rounding grows with them
-- (a bias gradient 4e-5 of its largest entry apart; in float64 the same check agrees to 1e-10), so
-- its absolute tolerance is a share of each tensor's largest value.
-- T5-v1_1's untied head and gated GELU the same (an attention output gradient 2e-5 apart in float32,
-- 1e-10 in float64).
local tolerance = { gpt_neo = { rtol = 1e-4, atol = -1e-4 }, t5_gated = { rtol = 1e-4, atol = -1e-4 } }

for _, kind in ipairs({ "gpt2", "bert", "roberta", "albert", "llama", "qwen2", "mistral", "gpt_neo", "opt", "t5",
  "t5_gated" }) do
  describe(kind .. " tensor parallel schedule", function()
    it("verifies against the unscheduled model, outputs and gradients", function()
      local sch = slapo.create_schedule(build(kind))
      slapo.manual_seed(5)
      local ids = slapo.randint(0, 64, { 2, 8 })
      local report = slapo.verify(sch, inputs(kind, ids), tolerance[kind] or { rtol = 1e-4, atol = 1e-5 }, function(s)
        local notes = schedule_of(kind).schedule(s, { checkpoint = 0.5 })
        eq(0, #notes)
      end)
      check_sharded(kind, build(kind), sch.mod)
      -- every parameter's gradient was compared: none skipped, none without a gradient
      eq(0, report.skipped_params)
      eq(0, report.no_gradient)
      eq(report.params, report.gradients)
      eq(#build(kind):parameters(), report.params)
    end)

    it("trains 3 AdamW steps with the single-rank loss curve", function()
      local ref = build(kind)
      local sch = slapo.create_schedule(build(kind))
      schedule_of(kind).schedule(sch, { fork_rng = false })
      local model = slapo.build(sch)
      same_loss_curve(ref, model, "with TP")
    end)
  end)
end

describe("reference schedules with fuse = \"all\"", function()
  local fused_configs = {
    gpt2 = { n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16, attn_pdrop = 0 },
    llama = configs.llama,
    bert = configs.bert,
  }
  local fused_types = { gpt2 = "FusedGPT2MLP", llama = "FusedLlamaMLP", bert = "FusedBertOutput" }
  local fused_paths = { gpt2 = "transformer.h.0.mlp", llama = "model.layers.0.mlp", bert = "bert.encoder.layer.0.output" }
  for _, kind in ipairs({ "gpt2", "llama", "bert" }) do
    it(kind .. ": the slapo.op kernels under TP = 2 keep the single-rank loss curve", function()
      local function model()
        slapo.manual_seed(21)
        return slapo.models[kind](fused_configs[kind])
      end
      local ref, sch = model(), slapo.create_schedule(model())
      local notes = require("slapo.schedules." .. kind).schedule(sch, { fuse = "all", fork_rng = false })
      eq(0, #notes)
      eq(fused_types[kind], sch[fused_paths[kind]].mod:type())
      same_loss_curve(ref, slapo.build(sch), "fused with TP")
    end)
  end
end)

describe("shard groups", function()
  it("split each section of a fused projection and gather back in order", function()
    local sch = slapo.create_schedule(slapo.nn.Sequential({ slapo.nn.Linear(4, 12) }))
    local full = sch.mod["0"].weight:clone()
    sch["0"]:shard("weight", 0, { groups = 3 })
    local gathered = slapo.dist.all_gather(sch.mod["0"].weight, 0)
    -- rank r holds rows [2r, 2r+2) of each 4-row section
    local r = slapo.dist.rank()
    assert(sch.mod["0"].weight:narrow(0, 0, 2):equal(full:narrow(0, 2 * r, 2)))
    assert(sch.mod["0"].weight:narrow(0, 2, 2):equal(full:narrow(0, 4 + 2 * r, 2)))
    eq({ 12, 4 }, gathered:size())
  end)
end)

describe("consolidated checkpoints", function()
  it("gather a TP=2 model into one HF checkpoint that loads as the unsharded model", function()
    local ref = build("gpt2"):eval()
    local sch = slapo.create_schedule(build("gpt2"))
    require("slapo.schedules.gpt2").schedule(sch, {})
    local dir = "/tmp/slapo-consolidated-" .. os.getenv("MASTER_PORT")
    slapo.save(sch, dir)
    slapo.dist.barrier()
    local loaded = slapo.models.from_pretrained(dir):eval()
    local ids = slapo.randint(0, 64, { 1, 6 })
    close(ref(ids), loaded(ids), { rtol = 1e-5, atol = 1e-6 })
    eq(ref:num_params(), loaded:num_params())
    slapo.dist.barrier()
    if slapo.dist.rank() == 0 then
      os.execute("rm -rf " .. dir)
    end
  end)
end)

describe("hot swap on two ranks", function()
  it("moves a training run from one rank's layout to TP = 2 at a step boundary", function()
    local path = "/tmp/slapo-swap-" .. os.getenv("MASTER_PORT") .. ".lua"
    local function write(text) reference.write_shared(path, text) end
    slapo.manual_seed(2)
    local ids = slapo.randint(0, 64, { 2, 8 })
    local function train(edit)
      write("return function(sch) end\n")
      return slapo.train({ make_model = function()  -- dropout off: the swap must not change the math
        slapo.manual_seed(21)
        return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16,
          resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
      end, schedule_file = path, steps = 6, lr = 1e-2, quiet = true, data = function() return ids end,
        on_step = function(step) if step == 2 and edit then write(edit) end end })
    end
    local plain = train(nil)
    local swapped = train("return function(sch) require('slapo.schedules.gpt2').schedule(sch, {fork_rng = false}) end\n")
    matches("shard", swapped.schedule:log())
    for step = 1, 6 do
      assert(math.abs(plain.losses[step] - swapped.losses[step]) < 1e-4 * plain.losses[step],
        ("step %d: %.7f vs %.7f"):format(step, plain.losses[step], swapped.losses[step]))
    end
  end)
end)

describe("vocab-parallel embeddings with a padding row", function()
  it("give the padding row the gradient the unsharded model gives it (RoBERTa's padding id 1 in the input)", function()
    local sch = slapo.create_schedule(build("roberta"))
    local ids = slapo.tensor({ { 5, 1, 1, 40, 2, 1, 7, 63 } }, { dtype = "int64" })
    local report = slapo.verify(sch, { ids }, { rtol = 1e-4, atol = 1e-5 }, function(s)
      require("slapo.schedules.roberta").schedule(s, {})
    end)
    eq(report.params, report.gradients)
  end)
end)
