-- Slapo's own multi-rank tests (awslabs/slapo, tests/), ported to slapo-lua's Lua API: a `describe`
-- per Slapo file, an `it` per test function starting with its name. docs/slapo-suite.md lists every
-- Slapo test, where each lives here and those not ported, with why.
local world = slapo.dist.world_size()
local rank = slapo.dist.rank()

local function same_on_all_ranks(t)
  slapo.dist.broadcast(t, 0)
  return t
end

local function linear_with_input(seed)
  slapo.manual_seed(seed)
  local model = slapo.nn.Linear(10, 10)
  local x = same_on_all_ranks(slapo.randn({ 10, 10 }))
  return model, x
end

-- out (and the input's gradient) of `model` on x, after `schedule(sch)`.
local function run_scheduled(model, x, schedule)
  local sch = slapo.create_schedule(model)
  schedule(sch)
  local m = slapo.build(sch)
  local xg = x:clone():requires_grad(true)
  local out = m(xg)
  out:mean():backward()
  return out, xg.grad
end

local function reference(x)
  local model = linear_with_input(5)
  local xg = x:clone():requires_grad(true)
  local out = model(xg)
  out:mean():backward()
  return out, xg.grad
end

describe("test_shard.py", function()
  it("test_linear: column-sharded linear1 (bwd all-reduce), row-sharded linear2 (fwd all-reduce)", function()
    local function model()
      slapo.manual_seed(9999)
      return slapo.nn.Module({ type = "Model",
        children = { linear1 = slapo.nn.Linear(20, 30), linear2 = slapo.nn.Linear(30, 40, { bias = false }) },
        forward = function(self, data) return self.linear2(self.linear1(data)) end })
    end
    local sch = slapo.create_schedule(model())
    local data = same_on_all_ranks(slapo.randn({ 10, 20 }))
    local report = slapo.verify(sch, { data }, { rtol = 1e-5, atol = 1e-5 }, function(s)
      s["linear1"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
      s["linear2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    end)
    eq(3, report.gradients)
    eq({ 30 / world, 20 }, sch["linear1"].mod.weight:size())
    eq({ 40, 30 / world }, sch["linear2"].mod.weight:size())
  end)
end)

describe("test_shard.py (convolutions)", function()
  -- Slapo's WideResNet bottleneck (inplanes = planes = 64, base width 128) at a quarter of its
  -- widths: conv1 column-sharded with its BatchNorm (running statistics too), conv2 row-sharded
  -- and all-reduced, conv3 column-sharded with bn3 gathered along the channels.
  for _, mode in ipairs({ "eval", "train" }) do
    it("test_conv (" .. mode .. " mode): outputs and gathered gradients equal the unsharded block", function()
      local function model()
        slapo.manual_seed(9999)
        local planes, width = 16, 32
        return slapo.nn.Module({ type = "Model",
          children = { conv1 = slapo.nn.Conv2d(planes, width, 1, { bias = false }), bn1 = slapo.nn.BatchNorm2d(width),
            conv2 = slapo.nn.Conv2d(width, width, 3, { padding = 1, bias = false }), bn2 = slapo.nn.BatchNorm2d(width),
            conv3 = slapo.nn.Conv2d(width, planes * 4, 1, { bias = false }), bn3 = slapo.nn.BatchNorm2d(planes * 4) },
          forward = function(self, x)
            return self.bn3(self.conv3(self.bn2(self.conv2(self.bn1(self.conv1(x))))))
          end }):to("float64")
      end
      -- float64: in training mode the batch statistics of a sharded block sum in another order, which
      -- float32 rounds by about 1e-5 relative, as much as a wrong shard would be off at a few points
      slapo.manual_seed(7)  -- the input, whatever the cases before drew
      local data = same_on_all_ranks(slapo.randn({ 2, 16, 8, 8 }, { dtype = "float64" }))
      local sch = slapo.create_schedule(model())
      local report = slapo.verify(sch, { data }, { train = mode == "train", rtol = 1e-9, atol = 1e-10 }, function(s)
        s["conv1"]:shard("weight", 0):sync("bwd_post", "all_reduce")
        for _, name in ipairs({ "weight", "bias", "running_mean", "running_var" }) do
          s["bn1"]:shard(name, 0)
        end
        s["conv2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
        s["conv3"]:shard("weight", 0):sync("bwd_post", "all_reduce")
        for _, name in ipairs({ "weight", "bias", "running_mean", "running_var" }) do
          s["bn3"]:shard(name, 0)
        end
        s["bn3"]:sync("fwd_post", "all_gather", { axis = 1 })
      end)
      eq(1, report.outputs)
      eq(9, report.gradients)
      eq({ 32 / world, 16, 1, 1 }, sch["conv1"].mod.weight:size())
      eq({ 32 / world }, sch["bn1"].mod.running_mean:size())
    end)
  end
end)

describe("test_shard_sync_op.py", function()
  it("test_all_gather_forward_output: gathered along dim 1, scattered back: the reference", function()
    local model, x = linear_with_input(5)
    local ref, ref_grad = reference(x)
    local out, grad = run_scheduled(model, x, function(sch)
      sch:sync("fwd_post", "all_gather", { axis = 1 })
      sch:sync("fwd_post", "scatter", { axis = 1 })
    end)
    close(ref, out, { atol = 1e-5 })
    close(ref_grad, grad, { atol = 1e-5 })
  end)

  it("test_reduce_scatter_forward_output: reduce-scattered then gathered: world x the reference", function()
    local model, x = linear_with_input(5)
    local ref, ref_grad = reference(x)
    local out, grad = run_scheduled(model, x, function(sch)
      sch:sync("fwd_post", "reduce_scatter", { axis = 1 })
      sch:sync("fwd_post", "all_gather", { axis = 1 })
    end)
    close(ref * world, out, { atol = 1e-5 })
    eq({ 10, 10 }, grad:size())
  end)

  it("test_scatter_forward_output: scattered then gathered: the reference, gradients too", function()
    local model, x = linear_with_input(5)
    local ref, ref_grad = reference(x)
    local out, grad = run_scheduled(model, x, function(sch)
      sch:sync("fwd_post", "scatter", { axis = 1 })
      sch:sync("fwd_post", "all_gather", { axis = 1 })
    end)
    close(ref, out, { atol = 1e-5 })
    close(ref_grad, grad, { atol = 1e-5 })
  end)

  it("test_reduce_forward_output: all-reduced output is world x the reference", function()
    local model, x = linear_with_input(5)
    local ref = reference(x)
    local out = run_scheduled(model, x, function(sch) sch:sync("fwd_post", "all_reduce") end)
    close(ref * world, out, { atol = 1e-5 })
  end)

  it("test_reduce_backward_grad: the input gradient is all-reduced (world x the reference)", function()
    local model, x = linear_with_input(5)
    local ref, ref_grad = reference(x)
    local out, grad = run_scheduled(model, x, function(sch) sch:sync("bwd_post", "all_reduce") end)
    close(ref, out, { atol = 1e-5 })
    close(ref_grad * world, grad, { atol = 1e-5 })
  end)
end)

describe("test_reshard.py", function()
  local function mlp()
    slapo.manual_seed(3)
    return slapo.nn.Module({ type = "MLP",
      children = { fc1 = slapo.nn.Linear(16, 64), fc2 = slapo.nn.Linear(64, 16) },
      forward = function(self, x) return self.fc2(slapo.F.gelu(self.fc1(x))) end })
  end
  local schemes = {
    { "1 naive RR", function() end },
    { "2 RS -> SR", function(s)
      s["fc1"]:shard("weight", 0):shard("bias", 0):sync("fwd_post", "RS->SR")
      s["fc2"]:sync("fwd_post", "SR->RR")
    end },
    { "3 SR -> RS", function(s)
      s["fc1"]:shard("weight", 0):shard("bias", 0):sync("fwd_post", "RS->SR"):sync("fwd_post", "SR->RS")
      s["fc2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    end },
    { "4 Megatron", function(s)
      s["fc1"]:shard("weight", 0):shard("bias", 0)
      s["fc2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    end },
    { "5 RS -> RR twice", function(s)
      s["fc1"]:shard("weight", 0):shard("bias", 0):sync("fwd_post", "RS->RR")
      s["fc2"]:shard("weight", 0):shard("bias", 0):sync("fwd_post", "RS->RR")
    end },
    { "6 RR -> RS", function(s)
      s["fc1"]:sync("fwd_post", "RR->RS")
      s["fc2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    end },
    { "7 RR -> SR", function(s)
      s["fc1"]:sync("fwd_post", "RR->SR")
      s["fc2"]:sync("fwd_post", "SR->RR")
    end },
    { "8 RR -> SR before fc1", function(s)
      s["fc1"]:sync("fwd_pre", "RR->SR")
      s["fc2"]:sync("fwd_post", "SR->RR")
    end },
  }
  it("test_schemes: all 8 resharding schemes verify against the unsharded MLP (forward)", function()
    local x = same_on_all_ranks(slapo.randn({ 2, 8, 16 }))
    for _, scheme in ipairs(schemes) do
      local ok, err = pcall(slapo.verify, slapo.create_schedule(mlp()), { x }, { backward = false, rtol = 1e-5,
        atol = 1e-5 }, scheme[2])
      assert(ok, "scheme " .. scheme[1] .. ": " .. tostring(err))
    end
  end)
end)

describe("test_fork_rng.py", function()
  it("test_dropout: dropout masks agree across ranks without fork_rng and differ with it", function()
    local function model()
      return slapo.nn.Module({ type = "Model", forward = function(_, x) return slapo.F.dropout(x, 0.5, true) end })
    end
    local data = same_on_all_ranks(slapo.randn({ 10, 20 }))
    local function outputs(fork)
      slapo.manual_seed(123)
      local sch = slapo.create_schedule(model())
      if fork then
        sch:fork_rng()
      end
      local out = slapo.build(sch)(data)
      local all, rows = slapo.dist.all_gather(out:contiguous(), 0), out:size(0)
      local parts = {}
      for r = 1, world do
        parts[r] = all:narrow(0, (r - 1) * rows, rows)
      end
      return parts
    end
    local same = outputs(false)
    for r = 2, world do
      close(same[1], same[r], { rtol = 0, atol = 0 })
    end
    local forked = outputs(true)
    for r = 2, world do
      assert(not forked[1]:equal(forked[r]), "rank " .. (r - 1) .. " drew the same mask as rank 0")
    end
  end)
end)

describe("test_checkpoint.py", function()
  -- Slapo forks its CUDA RNG tracker around the dropout of the partitioned activation; slapo-lua
  -- forks the dropout module's random stream per rank (fork_rng), which checkpoint restores too.
  it("test_activation_checkpoint_with_rng_states: same outputs and gradients with and without", function()
    local full = 5 * world
    local function model()
      slapo.manual_seed(7)
      return slapo.nn.Module({ type = "Model",
        children = { linear1 = slapo.nn.Linear(full, 5 * world, { bias = false }), dropout1 = slapo.nn.Dropout(0.5),
          linear2 = slapo.nn.Linear(5 * world, full, { bias = false }), dropout2 = slapo.nn.Dropout(0.5) },
        forward = function(self, x)
          return self.dropout2(self.linear2(self.dropout1(self.linear1(x))))
        end })
    end
    local function schedule(checkpointed)
      -- the model under a root that holds its inputs (checkpoint of the root itself is refused)
      local sch = slapo.create_schedule(slapo.nn.Sequential({ model() }))
      sch["0.linear1"]:shard("weight", 0):sync("bwd_post", "all_reduce")
      sch["0.dropout1"]:fork_rng()  -- the partitioned activation: a different mask per rank
      sch["0.linear2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
      if checkpointed then
        sch["0"]:checkpoint()
      end
      return slapo.build(sch)
    end
    local data = same_on_all_ranks(slapo.randn({ full, full }))
    local function run(m)
      m:train()
      local x = data:clone():requires_grad(true)
      slapo.manual_seed(123)
      local out = m(x)
      out:mean():backward()
      local inner = m["0"]
      return { out, inner.linear1.weight.grad, inner.linear2.weight.grad, x.grad }
    end
    local refs = run(schedule(false))
    local outs = run(schedule(true))
    for i = 1, 4 do
      close(refs[i], outs[i], { atol = 1e-6 })
    end
  end)
end)

describe("test_checkpoint.py (a subgraph)", function()
  -- Slapo's test_checkpoint_function on 2 ranks: the checkpointed subgraph's wrapper holds linear1,
  -- so it can be sharded there (slapo-lua before: the Linear stayed outside the wrapper).
  it("test_checkpoint_function: linear1 sharded inside CheckPointWrapper_0 verifies, outputs and gradients", function()
    local function model()
      slapo.manual_seed(17)
      return slapo.nn.Module({ type = "Model",
        children = { linear1 = slapo.nn.Linear(20, 8 * world), linear2 = slapo.nn.Linear(8 * world, 20) },
        forward = function(self, x) return self.linear2(slapo.F.relu(self.linear1(x))) end })
    end
    local data = same_on_all_ranks(slapo.randn({ 6, 20 }))
    local sch = slapo.create_schedule(model())
    local report = slapo.verify(sch, { data }, { rtol = 1e-5, atol = 1e-5 }, function(s)
      s:trace({ inputs = { data } })
      local found = s:find(function(x) return slapo.F.relu(slapo.pattern.call_module("linear1", x)) end)
      eq(1, #found)
      s:checkpoint(found[1])
      s["CheckPointWrapper_0.linear1"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
      s["linear2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    end)
    eq(4, report.gradients)
    eq({ 8, 20 }, sch["CheckPointWrapper_0.linear1"].mod.weight:size())
  end)
end)

describe("test_annotate.py", function()
  it("test_shard_annotate (init_empty_weights): a meta model sharded, then built: its slice of the same weights", function()
    local cfg = { hidden_size = 16, intermediate_size = 32, hidden_act = "gelu" }
    local function megatron(sch)
      sch["fc1"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
      sch["fc2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    end
    local empty = slapo.create_schedule(slapo.models.mlp(cfg, { device = "meta" }))
    megatron(empty)
    local model = slapo.build(empty, { seed = 5 })
    eq("cpu", model.fc1.weight:device())
    eq({ 32 / world, 16 }, model.fc1.weight:size())
    eq({ 32, 16 }, empty["fc1"]:param_info("weight").full_shape)
    local real = slapo.create_schedule(slapo.models.mlp(cfg))
    megatron(real)
    local same = slapo.build(real, { init_weights = true, seed = 5 })
    close(same.fc1.weight, model.fc1.weight, { rtol = 0, atol = 0 })
    close(same.fc2.weight, model.fc2.weight, { rtol = 0, atol = 0 })
    local x = same_on_all_ranks(slapo.randn({ 4, 16 }))
    close(same(x), model(x))
  end)

  it("test_shard_annotate: sharded parameters remember their full shape", function()
    local model = slapo.nn.Module({ type = "Model",
      children = { layer1 = slapo.nn.Linear(32, 32, { bias = false }), layer2 = slapo.nn.Linear(32, 32, { bias = false }) },
      forward = function(self, x) return self.layer2(self.layer1(x)) end })
    local sch = slapo.create_schedule(model)
    sch["layer1"]:shard("weight", 0):sync("bwd_post", "all_reduce")
    sch["layer2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    slapo.build(sch)
    eq({ 32, 32 }, sch["layer1"]:param_info("weight").full_shape)
    eq({ 32, 32 }, sch["layer2"]:param_info("weight").full_shape)
    eq({ 32 / world, 32 }, sch["layer1"].mod.weight:size())
  end)
end)

describe("test_consolidation.py", function()
  it("test_multigpu_consolidation: a sharded meta model built with an init function holds its values", function()
    local model = slapo.models.mlp({ hidden_size = 20, intermediate_size = 30 * world }, { device = "meta" })
    local sch = slapo.create_schedule(model)
    sch["fc1"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
    sch["fc2"]:shard("weight", 1):sync("fwd_post", "all_reduce")
    local built = slapo.build(sch, { init_weights = function(_, m)
      slapo.no_grad(function()
        for _, p in ipairs(m:parameters()) do
          p:zero_()
        end
      end)
    end })
    eq({ 30, 20 }, built.fc1.weight:size())
    for _, p in ipairs(built:parameters()) do
      eq("cpu", p:device())
      eq(0, p:abs():sum():item())
    end
  end)
end)

-- Slapo runs its pipelines through DeepSpeed on 2, 4 and 8 GPUs; slapo-lua runs its own pipeline
-- runtime. On the 2 ranks of this suite: the 2-rank cases, and 4 stages as 2 interleaved chunks
-- per rank (the 4- and 8-rank layouts are in docs/slapo-suite.md).
describe("test_ds_pipeline.py", function()
  local parallel = require("slapo.parallel")

  it("test_pipeline_4stages_pp: 12 linears cut after layers 2, 5 and 8, verified step on 2 ranks", function()
    slapo.manual_seed(31)
    local linears = {}
    for i = 1, 12 do
      linears[i] = slapo.nn.Linear(10, 10)
    end
    local model = slapo.nn.Module({ type = "Model", children = { layers = slapo.nn.ModuleList(linears) },
      forward = function(self, x)
        for i = 0, 11 do
          x = self.layers[tostring(i)](x)
        end
        return x
      end })
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(model, { group = layout.tp_group })
    local inp = same_on_all_ranks(slapo.randn({ 8, 10 }))
    local label = same_on_all_ranks(slapo.randint(0, 10, { 8 }))
    local report, pipe = slapo.verify(sch, { inp }, { labels = label, pipeline = { group = layout.pp_group,
      micro_batches = 2, loss = function(out, y) return slapo.F.cross_entropy(out, y) end } }, function(s)
      s["layers.2"]:cut_pipeline_stage()
      s["layers.5"]:cut_pipeline_stage()
      s["layers.8"]:cut_pipeline_stage()
    end)
    matches("pipeline of 4 stages on 2 ranks", tostring(pipe))
    assert(report.gradients >= 12, "compared " .. report.gradients .. " gradients")
  end)

  it("test_bert_2stages_pp: BERT cut after its last encoder layer but one, verified step on 2 ranks", function()
    slapo.manual_seed(32)
    local model = slapo.models.bert({ hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 2,
      intermediate_size = 64, vocab_size = 64, max_position_embeddings = 16, hidden_dropout_prob = 0,
      attention_probs_dropout_prob = 0 })
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(model, { group = layout.tp_group })
    local ids = same_on_all_ranks(slapo.randint(0, 64, { 2, 8 }))
    local report = slapo.verify(sch, { ids }, { pipeline = { group = layout.pp_group, micro_batches = 2 } },
      function(s) s["bert.encoder.layer.2"]:cut_pipeline_stage() end)
    assert(report.gradients > 10, "compared " .. report.gradients .. " gradients")
  end)
end)

-- Slapo's GPT-Neo partitions (test_pipeline_partition.py) check what crosses each cut of HF's traced
-- GPTNeoModel (1.3B's 24 layers): hidden states, the mask and output_shape reach the last stage.
-- Here the model is the zoo's GPT-Neo with 1.3B's layer pattern (global and local alternating) at a
-- tiny width, its window shorter than the sequence; the mask and positions come from the inputs
-- alone, so each stage recomputes them and only the hidden states cross. The pipelined step is
-- verified against the unscheduled model (loss and every gradient).
describe("test_pipeline_partition.py (GPT-Neo)", function()
  local parallel = require("slapo.parallel")
  local function gpt_neo_pipeline(cuts)
    slapo.manual_seed(33)
    local model = slapo.models.gpt_neo({ hidden_size = 32, num_layers = 24, num_heads = 4, window_size = 4,
      attention_types = { { { "global", "local" }, 12 } }, vocab_size = 64, max_position_embeddings = 16 })
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(model, { group = layout.tp_group })
    local ids = same_on_all_ranks(slapo.randint(0, 64, { 2, 8 }))
    local report, pipe = slapo.verify(sch, { ids }, { pipeline = { group = layout.pp_group, micro_batches = 2 } },
      function(s)
        for _, layer in ipairs(cuts) do
          s["transformer.h." .. layer]:cut_pipeline_stage()
        end
      end)
    assert(report.gradients > 100, "compared " .. report.gradients .. " gradients")
    return tostring(pipe)
  end

  it("test_gpt_neo_two_stages: cut after h.11, only the hidden states cross", function()
    local described = gpt_neo_pipeline({ 11 })
    matches(rank == 0 and "receives 0, sends 1 tensor" or "receives 1, sends none: its output is the model.s", described)
  end)

  it("test_gpt_neo_four_stages: cut after h.5, h.11 and h.17 (2 chunks a rank), only the hidden states cross", function()
    local described = gpt_neo_pipeline({ 5, 11, 17 })
    matches("pipeline of 4 stages on 2 ranks", described)
    if rank == 0 then
      matches("stage 0: [^;]*%(receives 0, sends 1 tensor%); stage 2: [^;]*%(receives 1, sends 1 tensor%)", described)
    else
      matches("stage 1: [^;]*%(receives 1, sends 1 tensor%); stage 3: [^;]*%(receives 1, sends none: its output is the model.s%)", described)
    end
  end)
end)

-- Slapo's GPT-Neo schemes (autoshard/test_gpt.py::test_schemes) run only the Megatron one (the
-- function exits after it): q, k, v column-sharded, out_proj row-sharded, the MLP likewise, on
-- GPT-Neo 1.3B made under init_empty_weights. Here: its layer pattern at a tiny width, verify
-- materialising the meta model, with the input-gradient all-reduces Slapo's forward-only Verify
-- leaves out, so outputs and gradients are compared.
describe("autoshard/test_gpt.py", function()
  it("test_schemes: Megatron on a GPT-Neo made without memory verifies, outputs and gradients", function()
    -- {device = "meta"}: what init_empty_weights does for the zoo's models
    local sch = slapo.create_schedule(slapo.models.gpt_neo({ hidden_size = 32, num_layers = 4, num_heads = 4,
      window_size = 4, attention_types = { { { "global", "local" }, 2 } }, vocab_size = 64, max_position_embeddings = 16 },
      { device = "meta" }))
    local ids = same_on_all_ranks(slapo.randint(0, 64, { 2, 8 }))
    local report = slapo.verify(sch, { ids }, { rtol = 1e-4, atol = -1e-4 }, function(s)
      for i = 0, 3 do
        local attn = s["transformer.h." .. i .. ".attn.attention"]
        for _, name in ipairs({ "q_proj", "k_proj", "v_proj" }) do
          attn[name]:shard("weight", 0)
        end
        attn:sync("bwd_post", "all_reduce")
        attn["out_proj"]:shard("weight", 1):sync("fwd_post", "all_reduce")
        local mlp = s["transformer.h." .. i .. ".mlp"]
        mlp["c_fc"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
        mlp["c_proj"]:shard("weight", 1):sync("fwd_post", "all_reduce")
      end
    end)
    eq(report.params, report.gradients, "every gradient compared")
    eq(32 / world, sch["transformer.h.3.attn.attention.q_proj"].mod.weight:size(0))
  end)
end)

-- Slapo's resharding schemes for BERT (autoshard/test_bert.py::test_schemes), each verified
-- against the unsharded model. The zoo's attention views its heads as -1, so the head-count
-- rewrite Slapo needs after sharding q/k/v (fix_attention_mask_shape) has nothing to do here.
describe("autoshard/test_bert.py", function()
  local cfg = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64,
    vocab_size = 64, max_position_embeddings = 16, hidden_dropout_prob = 0, attention_probs_dropout_prob = 0 }
  local function bert()
    slapo.manual_seed(41)
    return slapo.models.bert(cfg)
  end
  -- q, k and v read the same replicated input: its gradient is their ranks' partial sums, all-
  -- reduced once where the input enters (Slapo's Verify compares outputs only and omits this)
  local function shard_qkv(layer)
    for _, name in ipairs({ "query", "key", "value" }) do
      layer["attention.self." .. name]:shard("weight", 0):shard("bias", 0)
    end
    layer["attention.self"]:sync("bwd_post", "all_reduce")
  end
  local schemes = {
    megatron = function(sch)
      for i = 0, cfg.num_hidden_layers - 1 do
        local layer = sch["bert.encoder.layer." .. i]
        shard_qkv(layer)
        layer["attention.output.dense"]:shard("weight", 1):sync("fwd_post", "all_reduce")
        layer["intermediate.dense"]:shard("weight", 0):shard("bias", 0):sync("bwd_post", "all_reduce")
        layer["output.dense"]:shard("weight", 1):sync("fwd_post", "all_reduce")
      end
    end,
    activation_stationary = function(sch)
      for i = 0, cfg.num_hidden_layers - 1 do
        local layer = sch["bert.encoder.layer." .. i]
        shard_qkv(layer)
        local dense = layer["attention.output.dense"]
        dense:sync("fwd_pre", "RS->RR"):shard("weight", 0):shard("bias", 0):sync("fwd_post", "RS->RR")
        dense:sync("bwd_post", "all_reduce")  -- column-sharded on a replicated input, as below
        for _, name in ipairs({ "intermediate.dense", "output.dense" }) do
          layer[name]:shard("weight", 0):shard("bias", 0):sync("fwd_post", "RS->RR"):sync("bwd_post", "all_reduce")
        end
      end
    end,
    activation_sharding = function(sch, skip_param_sync)
      for i = 0, cfg.num_hidden_layers - 1 do
        local layer = sch["bert.encoder.layer." .. i]
        shard_qkv(layer)
        -- The residual joins the sequence-sharded branch: shard it the same way (RR -> SR). Slapo
        -- traces attention.output and replaces its add; slapo-lua's trace refuses inputs of
        -- another shape than the example's, and the add sees [b, s/p, d] beside [b, s, d] here, so
        -- the same computation comes as a replacement module around the original's children.
        local out = layer["attention.output"]
        local original = out.mod
        out:replace(slapo.nn.Module({ type = "BertSelfOutputSR",
          children = { dense = original.dense, dropout = original.dropout, LayerNorm = original.LayerNorm },
          forward = function(self, h, input)
            return self.LayerNorm(self.dropout(self.dense(h)) + slapo.dist.autograd.scatter_to(input, -2))
          end }))
        out["dense"]:sync("fwd_pre", "RS->SR")
        layer["output.LayerNorm"]:sync("fwd_post", "SR->RR")
        -- the replicated weights after the reshard see this rank's tokens only: sum their gradients
        -- (Megatron's sequence parallelism does this for its LayerNorms)
        for _, name in ipairs(skip_param_sync and {} or { "attention.output", "intermediate", "output" }) do
          layer[name]:sync("bwd_params", "all_reduce")
        end
      end
    end,
  }
  for _, name in ipairs({ "megatron", "activation_stationary", "activation_sharding" }) do
    it("test_schemes[" .. name .. "]: outputs and gradients equal the unsharded BERT", function()
      local ids = same_on_all_ranks(slapo.randint(0, 64, { 2, 8 }))
      local report = slapo.verify(slapo.create_schedule(bert()), { ids }, {}, schemes[name])
      eq(report.params, report.gradients, "every parameter's gradient compared")
    end)
  end
  it("sync('bwd_params') is needed by activation_sharding, and refuses sharded parameters", function()
    local ids = same_on_all_ranks(slapo.randint(0, 64, { 2, 8 }))
    matches("verify: the gradient of '.*' differs", pcall_err(slapo.verify, slapo.create_schedule(bert()), { ids }, {},
      function(sch) schemes.activation_sharding(sch, true) end))
    local bad = slapo.create_schedule(bert())
    bad["bert.encoder.layer.0.intermediate.dense"]:shard("weight", 0)
    matches("sync: mode 'bwd_params' on 'bert.encoder.layer.0.intermediate': 'dense.weight' is sharded",
      pcall_err(bad["bert.encoder.layer.0.intermediate"].sync, bad["bert.encoder.layer.0.intermediate"], "bwd_params",
        "all_reduce"))
    matches("mode 'bwd_params' on .* op must be 'all_reduce'", pcall_err(bad["bert.encoder.layer.0.output"].sync,
      bad["bert.encoder.layer.0.output"], "bwd_params", "all_gather", { axis = 0 }))
  end)
end)
