-- Pipeline parallelism on 2 ranks (one stage each; on 4, each stage is 2 ranks of TP): GPipe and
-- 1F1B training steps equal the single-rank model in loss, gradients and updated weights, with the
-- tied embedding / LM head kept in sync across the stages that use it.
local parallel = require("slapo.parallel")
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local configs = {
  gpt2 = { n_embd = 32, n_layer = 4, n_head = 4, vocab_size = 64, n_positions = 16, resid_pdrop = 0, embd_pdrop = 0,
    attn_pdrop = 0 },
  llama = { hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 64 },
  -- a mixture of experts: each layer returns its router logits beside the states (no load-balancing
  -- loss: the cuts pass the states on)
  mixtral = { hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 48, vocab_size = 64, num_local_experts = 4, num_experts_per_tok = 2 },
}
local layers = { gpt2 = "transformer.h", llama = "model.layers", mixtral = "model.layers" }
-- The stage this rank runs in parallel.layout({pp = 2}): on 4 ranks each stage is 2 ranks of TP.
local my_stage = math.floor(slapo.dist.rank() / (slapo.dist.world_size() / 2))

local function build(kind)
  slapo.manual_seed(21)
  return slapo.models[kind](configs[kind])
end

local function named(model)
  local out = {}
  for name, p in model:named_parameters() do
    out[name] = p
  end
  return out
end

local function batch(rows)
  slapo.manual_seed(9)
  local ids = slapo.randint(0, 64, { rows, 8 })
  slapo.dist.broadcast(ids, 0)
  return ids
end

-- A pipeline over the 2 ranks (each stage's TP group is the rank alone), and the one-rank model;
-- `chunks` stages per rank (interleaved when 2).
local function pipeline(kind, schedule, micro_batches, chunks)
  local layout = parallel.layout({ pp = 2 })
  local sch = slapo.create_schedule(build(kind), { group = layout.tp_group })
  parallel.cut_evenly(sch, layers[kind], 2 * (chunks or 1))
  local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, schedule = schedule,
    micro_batches = micro_batches } })
  return pipe, build(kind)
end

-- 3 AdamW steps of `pipe` beside the one-rank `ref` on `ids`: each step's loss equals `expected(step)`
-- (ref's loss, a tensor this backpropagates) and every gradient the pipeline holds equals ref's.
-- Returns the step-1 loss and ref's parameters by name.
local function steps_as_one_rank(pipe, ref, ids, expected_loss)
  return reference.pipeline_steps_as_one_process(pipe, ref, ids, "pipelined", { expected = expected_loss })
end

for _, case in ipairs({ { "gpt2", "1f1b", 4 }, { "gpt2", "gpipe", 2 }, { "llama", "1f1b", 4 }, { "llama", "gpipe", 4 },
  { "gpt2", "1f1b", 4, 2 }, { "gpt2", "gpipe", 2, 2 }, { "llama", "1f1b", 2, 2 }, { "mixtral", "1f1b", 4 },
  { "mixtral", "gpipe", 2, 2 } }) do
  local kind, schedule, m, chunks = case[1], case[2], case[3], case[4] or 1
  local what = chunks > 1 and ("4 stages on 2 ranks, interleaved %s"):format(schedule) or ("2 stages, " .. schedule)
  describe(("%s, %s, %d micro-batches"):format(kind, what, m), function()
    it("trains 3 AdamW steps with the single-rank loss, gradients and weights", function()
      local pipe, ref = pipeline(kind, schedule, m, chunks)
      local ids = batch(8)
      local _, theirs = steps_as_one_rank(pipe, ref, ids, function() return ref(ids, { labels = ids }) end)
      -- Adam divides by the gradient's own scale, so summing micro-batches in another order moves
      -- near-zero gradients' updates by up to a few 1e-5 of lr = 1e-2; an expert's gradient, from
      -- the few rows routed to it, has more such entries (up to 1e-4 seen, gradients within 4e-7).
      for name, p in pipe:named_parameters() do
        close(theirs[name], p, { rtol = 1e-4, atol = kind == "mixtral" and 2e-4 or 5e-5 })
      end
    end)
  end)
end

describe("pipeline stages", function()
  it("split GPT-2 between its layers, the tied embedding on both ends", function()
    local pipe = pipeline("gpt2", "1f1b", 2)
    pipe:prepare(batch(4))
    eq(my_stage, pipe.stage)
    eq(2, pipe.stages)
    local expected = my_stage == 0
        and { "transformer.wpe", "transformer.wte", "transformer.drop", "transformer.h.0", "transformer.h.1" }
        or { "transformer.h.2", "transformer.h.3", "transformer.ln_f", "lm_head" }
    eq(expected, pipe:leaves())
    eq({ "transformer.wte.weight" }, pipe:shared_parameters())
    matches("this rank runs stage " .. my_stage, tostring(pipe))
  end)

  it("drop the other stages' weights after the first trace", function()
    local pipe = pipeline("gpt2", "1f1b", 2)
    local full = pipe.module:num_params()
    local ids = batch(4)
    pipe:step(ids, { labels = ids })
    local released = pipe:released_parameters()
    local other = my_stage == 0 and "transformer.h.3.mlp.c_fc.weight" or "transformer.h.0.mlp.c_fc.weight"
    local found = false
    for _, name in ipairs(released) do
      found = found or name == other
      assert(name ~= "transformer.wte.weight", "the shared embedding stays on both stages")
    end
    assert(found, other .. " is released")
    eq(pipe:num_params(), pipe.module:num_params())  -- what is left is this stage's
    assert(pipe:num_params() < 0.75 * full, ("stage holds %d of %d"):format(pipe:num_params(), full))
    local other_shape = batch(2)
    matches("need a new trace of the whole model, but this rank dropped", pcall_err(pipe.step, pipe, other_shape,
      { labels = other_shape }))
  end)

  it("keep every weight with release_other_stages = false, and trace each new batch shape", function()
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(build("gpt2"), { group = layout.tp_group })
    parallel.cut_evenly(sch, "transformer.h", 2)
    local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2,
      release_other_stages = false } })
    local ref = build("gpt2")
    for _, rows in ipairs({ 4, 2 }) do
      local ids = batch(rows)
      close(ref(ids, { labels = ids }), slapo.tensor(pipe:step(ids, { labels = ids })), { rtol = 1e-5 })
    end
    eq(0, #pipe:released_parameters())
  end)

  it("report the step's busy time against the ideal bubble", function()
    local pipe = pipeline("gpt2", "gpipe", 4)
    local ids = batch(8)
    pipe:step(ids, { labels = ids })
    local stats = pipe:stats()
    eq(4, stats.micro_batches)
    close(slapo.tensor(1 / 5), slapo.tensor(stats.ideal_bubble))
    assert(stats.busy_s > 0 and stats.busy_s <= stats.wall_s, "busy time within the step")
  end)

  it("take a Lua loss function", function()
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(build("gpt2"), { group = layout.tp_group })
    parallel.cut_evenly(sch, "transformer.h", 2)
    local calls = 0
    local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2,
      loss = function(logits, labels)
        calls = calls + 1
        return (logits * logits):mean()
      end } })
    local ids = batch(4)
    local loss = pipe:step(ids, { labels = ids })
    local ref = build("gpt2")
    local logits = ref(ids)
    close((logits * logits):mean(), slapo.tensor(loss), { rtol = 1e-5 })
    eq(my_stage == 1 and 2 or 0, calls)
  end)
end)

-- A mixture of experts with its load-balancing loss: every layer's router logits reach the last
-- stage, which adds the loss of each micro-batch's routing, as transformers computes it for one call
-- on those rows (and gradient accumulation over the micro-batches).
describe("a pipeline of Mixtral with its load-balancing loss", function()
  local function aux_model(coef)
    local cfg = { output_router_logits = true, router_aux_loss_coef = coef }
    for k, v in pairs(configs.mixtral) do cfg[k] = v end
    slapo.manual_seed(21)
    return slapo.models.mixtral(cfg)
  end
  for _, case in ipairs({ { "1f1b", 4, 1 }, { "gpipe", 2, 2 } }) do
    local schedule, m, chunks = case[1], case[2], case[3]
    it(("trains 3 AdamW steps as one process on each micro-batch (%s, %d micro-batches, %d stages)"):format(schedule, m,
      2 * chunks), function()
      local layout = parallel.layout({ pp = 2 })
      local sch = slapo.create_schedule(aux_model(0.5), { group = layout.tp_group })
      parallel.cut_evenly(sch, layers.mixtral, 2 * chunks)
      local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, schedule = schedule, micro_batches = m } })
      local ref, without = aux_model(0.5), aux_model(0)
      local ids = batch(8)
      local lm_only = 0
      local first = steps_as_one_rank(pipe, ref, ids, function(step)
        local expected = nil  -- the mean of the micro-batches' losses, each with its own routing's
        for i = 0, m - 1 do
          local rows = ids:narrow(0, i * 8 / m, 8 / m)
          local loss = ref(rows, { labels = rows }) / m
          expected = expected and expected + loss or loss
          if step == 1 then lm_only = lm_only + without(rows, { labels = rows }):item() / m end
        end
        return expected
      end)
      assert(first - lm_only > 0.4, ("the load-balancing loss is in it: %.5f with, %.5f without"):format(first, lm_only))
    end)
  end

  it("verifies against the unscheduled model, micro-batch by micro-batch", function()
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(aux_model(0.5), { group = layout.tp_group })
    local report = slapo.verify(sch, { batch(4) }, { pipeline = { group = layout.pp_group, micro_batches = 2 } },
      function(s) parallel.cut_evenly(s, layers.mixtral, 2) end)
    assert(report.gradients > 10, "compared " .. report.gradients .. " gradients")
  end)
end)

describe("verifying a pipeline", function()
  for _, chunks in ipairs({ 1, 2 }) do
    it(("compares the step's loss and every stage gradient with the unscheduled model (%d chunk%s)"):format(chunks,
      chunks == 1 and "" or "s"), function()
      local layout = parallel.layout({ pp = 2 })
      local sch = slapo.create_schedule(build("gpt2"), { group = layout.tp_group })
      local report, pipe = slapo.verify(sch, { batch(4) }, { pipeline = { group = layout.pp_group, micro_batches = 2 } },
        function(s) parallel.cut_evenly(s, layers.gpt2, 2 * chunks) end)
      eq(1, report.outputs)
      assert(report.gradients > 10, "compared " .. report.gradients .. " gradients")
      if chunks == 2 then
        matches("pipeline of 4 stages on 2 ranks", tostring(pipe))
      end
    end)
  end

  it("names what differs: a loss that sums instead of averaging, a change to backward only", function()
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(build("gpt2"), { group = layout.tp_group })
    local sum_loss = function(logits, labels)
      return slapo.F.cross_entropy(logits:reshape({ -1, 64 }), labels:reshape({ -1 })) * labels:numel()
    end
    local err = pcall_err(slapo.verify, sch, { batch(4) }, { pipeline = { group = layout.pp_group, micro_batches = 2,
      loss = sum_loss } }, function(s) parallel.cut_evenly(s, layers.gpt2, 2) end)
    matches("verify: the pipeline's loss is [%d.]+, the unscheduled model's [%d.]+", err)
    -- a change to backward only: the loss agrees, the gradients below it do not
    err = pcall_err(slapo.verify, slapo.create_schedule(build("gpt2"), { group = layout.tp_group }), { batch(4) },
      { pipeline = { group = layout.pp_group, micro_batches = 2 } }, function(s)
        parallel.cut_evenly(s, layers.gpt2, 2)
        s["transformer.h.3"]:sync("fwd_post", function(y) return y:detach() + (y - y:detach()) * 2 end)
      end)
    matches("verify: the gradient of 'transformer%.[%w._]+' differs in pipeline stage %d", err)
    matches("verify: a pipeline is compared in eval mode", pcall_err(slapo.verify, slapo.create_schedule(build("gpt2"),
      { group = layout.tp_group }), { batch(4) }, { train = true, pipeline = { group = layout.pp_group } },
      function(s) parallel.cut_evenly(s, layers.gpt2, 2) end))
  end)
end)

describe("saving a pipeline", function()
  for _, chunks in ipairs({ 1, 2 }) do
    it(("writes the whole trained model as one checkpoint (%d chunk%s per rank)"):format(chunks, chunks == 1 and "" or "s"),
      function()
        local pipe, ref = pipeline("gpt2", "1f1b", 2, chunks)
        local ids = batch(4)
        local opts = { slapo.optim.adamw(ref, { lr = 1e-2 }) }
        pipe:prepare(ids)
        opts[2] = slapo.optim.adamw(pipe:parameters(), { lr = 1e-2 })
        ref(ids, { labels = ids }):backward()
        pipe:step(ids, { labels = ids })
        opts[1]:step()
        opts[2]:step()
        assert(#pipe:released_parameters() > 0, "this rank dropped the other stages' weights")
        local dir = os.getenv("TMPDIR") or "/tmp"
        dir = dir .. "/slapo-pipe-save-" .. chunks
        slapo.dist.barrier()
        slapo.save(pipe, dir)
        slapo.dist.barrier()
        local loaded = named(slapo.models.from_pretrained(dir))
        local compared = 0
        for name, p in ref:named_parameters() do
          close(p, loaded[name], { rtol = 1e-4, atol = 5e-5 })
          compared = compared + 1
        end
        assert(compared > 10, "compared " .. compared .. " parameters")
        slapo.dist.barrier()  -- every rank has read it before the next case writes again
      end)
  end

  it("needs the stages: before the first step it says so", function()
    local pipe = pipeline("gpt2", "1f1b", 2)
    matches("pipeline: the stages are not known before the model is traced", pcall_err(slapo.save, pipe, "/tmp/x"))
  end)
end)

describe("pipeline errors", function()
  it("name the cuts when they do not match the pipeline group", function()
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(build("gpt2"), { group = layout.tp_group })
    sch["transformer.h.0"]:cut_pipeline_stage()
    sch["transformer.h.2"]:cut_pipeline_stage()
    eq("build: 2 cuts (transformer.h.0, transformer.h.2) make 3 pipeline stages, which do not divide among the 2 "
      .. "ranks of the pipeline group (pipeline = {group = ...}); every rank runs as many stages (one, or several "
      .. "interleaved), so cut 1 or 3 times for this group",
      pcall_err(slapo.build, sch, { pipeline = { group = layout.pp_group } }))
  end)

  it("refuse a batch that does not split into the micro-batches", function()
    local pipe = pipeline("gpt2", "1f1b", 4)
    local ids = batch(6)
    eq("pipeline: the batch of 6 rows does not split into 4 micro-batches; use a batch size divisible by "
      .. "micro_batches", pcall_err(pipe.step, pipe, ids, { labels = ids }))
  end)

  it("ask for the pipeline group when the schedule shards over several ranks", function()
    local sch = slapo.create_schedule(build("gpt2"))
    sch["transformer.h.1"]:cut_pipeline_stage()
    matches("name the pipeline's ranks", pcall_err(slapo.build, sch))
  end)

  it("refuse an unknown schedule", function()
    local layout = parallel.layout({ pp = 2 })
    local sch = slapo.create_schedule(build("gpt2"), { group = layout.tp_group })
    sch["transformer.h.1"]:cut_pipeline_stage()
    matches("interleaved 1F1B needs a number of micro%-batches divisible by the 2 ranks, got 3",
      pcall_err(function()
        local p = pipeline("gpt2", "1f1b", 3, 2)
        local ids = batch(6)
        p:step(ids, { labels = ids })
      end))
    eq("build: pipeline.schedule: unknown pipeline schedule 'zero-bubble' (choices: \"1f1b\", \"gpipe\")",
      pcall_err(slapo.build, sch, { pipeline = { group = layout.pp_group, schedule = "zero-bubble" } }))
  end)
end)
