-- Pipeline stages on meshes of their own (Alpa's submeshes): each stage has its own tensor- and
-- data-parallel degree and its own number of ranks. A step equals the one-rank model's in loss
-- and in every gradient (sharded ones gathered), and 3 AdamW steps train the same weights, by a loop
-- of pipe:step and by slapo.train (clipped by the whole model's norm, ZeRO-1 on the stages of
-- replicas). The meshes tried depend on the world: 2, 3 or 4 ranks (scripts/test runs this on each).
local parallel = require("slapo.parallel")
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local config = { n_embd = 32, n_layer = 4, n_head = 4, vocab_size = 64, n_positions = 16, resid_pdrop = 0,
  embd_pdrop = 0, attn_pdrop = 0 }

local function build()
  slapo.manual_seed(21)
  return slapo.models.gpt2(config)
end

local function batch(rows)
  slapo.manual_seed(9)
  local ids = slapo.randint(0, 64, { rows, 8 })
  slapo.dist.broadcast(ids, 0)
  return ids
end

local by_world = {
  [2] = { { {}, {} } },
  [3] = { { {}, { dp = 2 } }, { { dp = 2 }, {} }, { {}, {}, {} } },
  [4] = { { { tp = 2 }, { dp = 2 } }, { { dp = 2 }, { tp = 2 } }, { {}, { dp = 3 } }, { { tp = 2 }, {}, {} } },
}

local function describe_meshes(meshes)
  local out = {}
  for _, m in ipairs(meshes) do
    table.insert(out, ("%dx%d"):format(m.tp or 1, m.dp or 1))
  end
  return table.concat(out, " ")
end

-- The schedule of this rank's stage: Megatron's tensor parallelism over its mesh's tp ranks, the
-- layers cut evenly into one stage per mesh.
local function scheduled(layout)
  local sch = slapo.create_schedule(build(), { group = layout.tp_group })
  require("slapo.schedules.gpt2").schedule(sch, {})
  parallel.cut_evenly(sch, "transformer.h", layout.pp)
  return sch
end

local function pipeline_options(layout)
  return { meshes = layout.meshes, dp_group = layout.dp_group, micro_batches = 2 }
end

-- 3 AdamW steps of the pipeline beside the one-rank model, the losses equal; returns that model
local function trains_like_one_rank(pipe, ids, where)
  local ref = build()
  reference.pipeline_steps_as_one_process(pipe, ref, ids, "on " .. where, { gradients = false })
  return ref
end

-- `steps` (default 3) AdamW steps (lr 1e-2, clipped at `clip` unless it is nil) of the one-rank
-- model on `ids`: the model, each step's loss, each step's norm before clipping, and the optimizer.
local function one_rank_run(ids, clip, steps)
  local ref = build()
  local adamw = slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 })
  local losses, norms = {}, {}
  for step = 1, steps or 3 do
    adamw:zero_grad()
    local loss = ref(ids, { labels = ids })
    loss:backward()
    losses[step], norms[step] = loss:item(), clip and slapo.clip_grad_norm(ref, clip)
    adamw:step()
  end
  assert(not clip or norms[1] > clip, "the clip acts")
  return ref, losses, norms, adamw
end

-- Raises unless each weight this rank holds whole equals the one-rank model's.
local function same_whole_weights(pipe, ref)
  local theirs, compared = {}, 0
  for name, p in ref:named_parameters() do
    theirs[name] = p
  end
  for name, p in pipe:named_parameters() do
    if p:numel() == theirs[name]:numel() then  -- whole on this rank, not a shard
      close(theirs[name], p, { rtol = 1e-4, atol = 5e-5 })
      compared = compared + 1
    end
  end
  assert(compared > 3, "compared " .. compared .. " weights")
end

for _, meshes in ipairs(by_world[slapo.dist.world_size()] or {}) do
  describe(("stages on meshes (tp x dp) %s"):format(describe_meshes(meshes)), function()
    it("verifies: the step's loss and every gradient equal the one-rank model's", function()
      local layout = parallel.stage_layout(meshes)
      local sch = slapo.create_schedule(build(), { group = layout.tp_group })
      local report, pipe = slapo.verify(sch, { batch(12) }, { pipeline = pipeline_options(layout) }, function(s)
        require("slapo.schedules.gpt2").schedule(s, {})
        parallel.cut_evenly(s, "transformer.h", layout.pp)
      end)
      eq(1, report.outputs)
      assert(report.gradients > 5, "compared " .. report.gradients .. " gradients")
      matches(("this rank runs stage %d of stage meshes"):format(layout.stage), tostring(pipe))
    end)

    it("trains 3 AdamW steps with the one-rank loss and weights, and saves them", function()
      local layout = parallel.stage_layout(meshes)
      local pipe = slapo.build(scheduled(layout), { pipeline = pipeline_options(layout) })
      local ref = trains_like_one_rank(pipe, batch(12), "the meshes")
      same_whole_weights(pipe, ref)
      -- saved as one checkpoint: each stage's first rank sends its (gathered) weights
      local dir = (os.getenv("TMPDIR") or "/tmp") .. "/slapo-stage-meshes-" .. describe_meshes(meshes):gsub(" ", "_")
      slapo.dist.barrier()
      slapo.save(pipe, dir)
      slapo.dist.barrier()
      local loaded = {}
      for name, p in slapo.models.from_pretrained(dir):named_parameters() do
        loaded[name] = p
      end
      for name, p in ref:named_parameters() do
        close(p, loaded[name], { rtol = 1e-4, atol = 5e-5 })
      end
      slapo.dist.barrier()  -- every rank has read it before another case writes
    end)

    it("fully shards each stage's blocks over its replicas: the one-rank loss over 3 steps, verified", function()
      local layout = parallel.stage_layout(meshes)
      local function fully_sharded(s)
        require("slapo.schedules.gpt2").schedule(s, {})
        if layout.dp > 1 then
          for _, block in ipairs(s["transformer.h"]:children()) do block:fully_shard({ group = layout.dp_group }) end
        end
        parallel.cut_evenly(s, "transformer.h", layout.pp)
      end
      local report = slapo.verify(slapo.create_schedule(build(), { group = layout.tp_group }), { batch(12) },
        { pipeline = pipeline_options(layout) }, fully_sharded)
      assert(report.gradients > 5, "compared " .. report.gradients .. " gradients")
      local sch = slapo.create_schedule(build(), { group = layout.tp_group })
      fully_sharded(sch)
      local pipe = slapo.build(sch, { pipeline = pipeline_options(layout) })
      trains_like_one_rank(pipe, batch(12), "the meshes, fully sharded")
      if layout.dp > 1 then
        local whole = {}
        for name, p in build():named_parameters() do whole[name] = p:numel() end
        for name, p in pipe:named_parameters() do
          if name:match("^transformer%.h%.") then
            assert(p:numel() < whole[name], name .. " is whole on a stage of " .. layout.dp .. " replicas")
          end
        end
      end
    end)

    it("trains with slapo.train as one rank: loss, the clipped norm over every stage, every weight", function()
      local layout = parallel.stage_layout(meshes)
      local ids = batch(12)
      local function train(pipe, options)
        local opts = { model = pipe, layout = layout, data = function() return ids end, steps = 3, lr = 1e-2,
          schedule = "constant", quiet = true }
        for key, value in pairs(options or {}) do opts[key] = value end
        return slapo.train(opts)
      end
      local ref, losses, norms = one_rank_run(ids, 0.05)
      local pipe = slapo.build(scheduled(layout), { pipeline = pipeline_options(layout) })
      local result = train(pipe, { clip = 0.05 })
      reference.check_steps(result, losses, norms)
      same_whole_weights(pipe, ref)
      -- FLOPs: each rank the world's mean of the whole model's, each stage counted once over its
      -- replicas (a tp rank counts the weights shard keeps whole, so only meshes without tp are exact)
      local tp_somewhere = false
      for _, m in ipairs(layout.meshes) do tp_somewhere = tp_somewhere or m.tp > 1 end
      local mine = require("slapo.step_flops").pipeline_per_row(pipe, layout.tp_group, layout.dp)(8)
      local whole = require("slapo.step_flops").per_row(build())(8)
      if not tp_somewhere then
        assert(math.abs(mine * slapo.dist.world_size() - whole) < 1e-9 * whole,
          ("%d x %.0f FLOPs a rank, %.0f the whole model"):format(slapo.dist.world_size(), mine, whole))
      end
      -- ZeRO-1 on the stages of replicas, AdamW on the others: each rank chooses its stage's optimizer.
      -- Without a dp_group ZeRO adds the replicas' parts up in its step (clipped: train adds them up
      -- before the norm is read, and ZeRO averages the equal sums); with one, the pipeline has added
      -- them up and ZeRO averages
      local optimizer = layout.dp > 1 and "zero_adamw" or "adamw"
      for _, case in ipairs({ { clip = 0.05 }, { clip = false }, { clip = false, dp_group = true } }) do
        local where = ("%s, clip %s%s"):format(optimizer, tostring(case.clip), case.dp_group and ", dp_group" or "")
        local ref_optimizer
        ref, losses, norms, ref_optimizer = one_rank_run(ids, case.clip or nil)
        pipe = slapo.build(scheduled(layout), { pipeline = { meshes = layout.meshes, micro_batches = 2,
          dp_group = (optimizer == "adamw" or case.dp_group) and layout.dp_group or nil } })
        result = train(pipe, { optimizer = optimizer, clip = case.clip or 0 })
        for step = 1, 3 do
          assert(math.abs(result.losses[step] - losses[step]) < 1e-5 * losses[step],
            ("%s, step %d: loss %.7f, one rank %.7f"):format(where, step, result.losses[step], losses[step]))
        end
        if case.clip then reference.check_steps(result, losses, norms) end
        same_whole_weights(pipe, ref)
        reference.same_first_moments(result.optimizer, pipe, ref_optimizer, ref, layout.dp_group, where)
      end
    end)

    it("resumes slapo.train from its checkpoint as the run that never stopped; a whole model reads it", function()
      local layout = parallel.stage_layout(meshes)
      local ids = batch(12)
      local dir = ("%s/slapo-meshes-checkpoints-%s-%s"):format(os.getenv("TMPDIR") or "/tmp",
        describe_meshes(meshes):gsub(" ", "_"), os.getenv("MASTER_PORT"))
      -- ZeRO-1 on the stages of replicas, AdamW on the others (each rank's optimizer file its own kind)
      local optimizer = layout.dp > 1 and "zero_adamw" or "adamw"
      local function pipeline(zero)
        return slapo.build(scheduled(layout), { pipeline = { meshes = layout.meshes, micro_batches = 2,
          dp_group = not zero and layout.dp_group or nil } })
      end
      local function train(pipe, zero, options)
        local opts = { model = pipe, layout = layout, data = function() return ids end, steps = 3, lr = 1e-2,
          schedule = "constant", clip = 0.05, quiet = true, optimizer = zero and optimizer or "adamw" }
        for key, value in pairs(options or {}) do opts[key] = value end
        return slapo.train(opts)
      end
      for _, zero in ipairs({ true, false }) do
        local straight = pipeline(zero)
        local through = train(straight, zero)
        train(pipeline(zero), zero, { steps = 2, checkpoint_dir = dir, checkpoint_every = 2 })
        local pipe = pipeline(zero)
        local resumed = train(pipe, zero, { checkpoint_dir = dir })
        eq(3, resumed.first_step)
        for _, key in ipairs({ "losses", "grad_norms" }) do
          assert(math.abs(resumed[key][3] - through[key][3]) < 1e-6 * through[key][3],
            ("%s, step 3's %s: %.9f resumed, %.9f straight through"):format(optimizer, key, resumed[key][3],
              through[key][3]))
        end
        same_whole_weights(pipe, straight)
        if not zero then  -- AdamW's pieces make the whole model: one rank's 2 steps
          local whole = build()
          eq(2, require("slapo.checkpoint").load(dir .. "/step-000002", whole,
            slapo.optim.adamw(whole, { lr = 1e-2, weight_decay = 0 })))
          local two = one_rank_run(ids, 0.05, 2)
          for name, p in pairs(two:state_dict()) do
            close(p, whole:state_dict()[name], { rtol = 1e-4, atol = 5e-5 })
          end
        end
        slapo.dist.barrier()
        if slapo.dist.rank() == 0 then os.execute("rm -rf '" .. dir .. "'") end
        slapo.dist.barrier()
      end
    end)

    it("trains with ZeRO-1 over each stage's replicas, summing their parts of the gradients", function()
      local layout = parallel.stage_layout(meshes)
      local pipe = slapo.build(scheduled(layout), { pipeline = { meshes = layout.meshes, micro_batches = 2 } })
      local ref = build()
      local ids = batch(12)
      pipe:prepare(ids)
      local opts = { slapo.optim.adamw(ref, { lr = 1e-2 }),
        slapo.optim.zero_adamw(pipe:parameters(), { lr = 1e-2, group = layout.dp_group, average = false }) }
      for _ = 1, 2 do
        opts[1]:zero_grad()
        opts[2]:zero_grad()
        ref(ids, { labels = ids }):backward()
        pipe:step(ids, { labels = ids })
        opts[1]:step()
        opts[2]:step()
      end
      local theirs = {}
      for name, p in ref:named_parameters() do
        theirs[name] = p
      end
      for name, p in pipe:named_parameters() do
        if p:numel() == theirs[name]:numel() then
          close(theirs[name], p, { rtol = 1e-4, atol = 5e-5 })
        end
      end
    end)
  end)
end

-- One stage a rank without meshes, three stages or more: the tied embedding and LM head live on the
-- first and last stages, and a middle stage (which released them) still joins their gradient's sum.
describe("a pipeline of one stage a rank", function()
  it("trains 3 AdamW steps with the one-rank loss, the tied weight summed past the middle stages", function()
    local world = slapo.dist.world_size()
    if world < 3 then
      skip("needs 3 ranks or more (scripts/test runs this file on 3 and 4)")
    end
    local layout = parallel.layout({ tp = 1, pp = world })
    local sch = slapo.create_schedule(build())
    parallel.cut_evenly(sch, "transformer.h", world)
    local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2 } })
    trains_like_one_rank(pipe, batch(4), world .. " stages")
  end)
end)

-- LLaMA (rotary, grouped key/value heads) and BERT (its attention mask passed between stages)
describe("stages on meshes, other families", function()
  for _, kind in ipairs({ "llama", "bert" }) do
    it(("verify %s on a one-rank stage and a data-parallel one"):format(kind), function()
      if slapo.dist.world_size() < 3 then
        skip("needs 3 ranks or more (scripts/test runs this file on 3 and 4)")
      end
      local model = function()
        slapo.manual_seed(21)
        return kind == "llama" and slapo.models.llama({ hidden_size = 32, num_hidden_layers = 4,
          num_attention_heads = 4, num_key_value_heads = 2, intermediate_size = 64, vocab_size = 64 })
          or slapo.models.bert({ hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4,
            intermediate_size = 64, vocab_size = 64, max_position_embeddings = 16 })
      end
      local layout = parallel.stage_layout({ {}, { dp = slapo.dist.world_size() - 1 } })
      local report = slapo.verify(slapo.create_schedule(model(), { group = layout.tp_group }), { batch(12) },
        { pipeline = pipeline_options(layout) }, function(s)
          parallel.cut_evenly(s, kind == "llama" and "model.layers" or "bert.encoder.layer", 2)
        end)
      assert(report.gradients > 5, "compared " .. report.gradients .. " gradients")
    end)
  end
end)

describe("stage meshes refuse", function()
  it("meshes that do not hold the world's ranks, by name", function()
    local world = slapo.dist.world_size()
    matches(("the meshes hold %d ranks, but the world has %d"):format(world + 1, world),
      pcall_err(parallel.stage_layout, { { dp = world }, {} }))
    matches("mesh 2 has an unknown field 'pp' %(valid: tp, dp%)", pcall_err(parallel.stage_layout, { {}, { pp = 2 } }))
    matches("pass two stage meshes or more", pcall_err(parallel.stage_layout, { { dp = world } }))
  end)

  it("a schedule sharded over other ranks than its mesh's tp ranks", function()
    local world = slapo.dist.world_size()
    local meshes = { {} }
    for i = 2, world do
      meshes[i] = {}
    end
    local layout = parallel.stage_layout(meshes)
    local sch = slapo.create_schedule(build(), { group = slapo.dist.world() })
    parallel.cut_evenly(sch, "transformer.h", world)
    matches("so its schedule must shard over ranks {" .. slapo.dist.rank() .. "}",
      pcall_err(slapo.build, sch, { pipeline = pipeline_options(layout) }))
  end)

  it("cuts that make more stages than meshes, and replicas other than the mesh's", function()
    local layout = parallel.stage_layout({ {}, { dp = slapo.dist.world_size() - 1 } })
    local sch = slapo.create_schedule(build(), { group = layout.tp_group })
    parallel.cut_evenly(sch, "transformer.h", 3)
    eq("build: the cuts make 3 pipeline stages, but pipeline.meshes names 2; give each stage one mesh",
      pcall_err(slapo.build, sch, { pipeline = pipeline_options(layout) }))
    sch = slapo.create_schedule(build(), { group = layout.tp_group })
    parallel.cut_evenly(sch, "transformer.h", 2)
    matches(("runs stage %d on tp 1 x dp %d, so pipeline.dp_group must be ranks {"):format(layout.stage, layout.dp),
      pcall_err(slapo.build, sch, { pipeline = { meshes = layout.meshes, dp_group = slapo.dist.world() } }))
  end)

  it("micro-batches whose rows a stage's replicas do not divide", function()
    if slapo.dist.world_size() < 3 then
      skip("needs 3 ranks or more (scripts/test runs this file on 3 and 4)")
    end
    local meshes = { {}, { dp = slapo.dist.world_size() - 1 } }
    local layout = parallel.stage_layout(meshes)
    local pipe = slapo.build(scheduled(layout), { pipeline = pipeline_options(layout) })
    local ids = batch(2)
    matches("micro%-batches of 1 rows do not split among stage 1's %d data%-parallel replicas",
      pcall_err(pipe.step, pipe, ids, { labels = ids }))
  end)
end)

describe("slapo.train of stage meshes refuses", function()
  it("another layout, other meshes and replicas not combined, by name", function()
    local world = slapo.dist.world_size()
    local meshes = { {}, { dp = world - 1 } }
    local layout = parallel.stage_layout(meshes)
    local pipe = slapo.build(scheduled(layout), { pipeline = pipeline_options(layout) })
    local function train(options)
      local opts = { model = pipe, layout = layout, data = function() return batch(4) end, steps = 1, quiet = true }
      for key, value in pairs(options) do opts[key] = value end
      return pcall_err(slapo.train, opts)
    end
    matches("stage meshes %(pipeline.meshes%) and a layout of one mesh with a pipeline: give layout = "
      .. "slapo.parallel.stage_layout", train({ layout = parallel.layout({ pp = 1 }) }))
    matches("stage meshes %(pipeline.meshes%) and no layout", train({ layout = false }))
    if world > 2 then
      local other = parallel.stage_layout({ { dp = world - 1 }, {} })
      matches(("the layout's meshes %%(tp x dp%%) 1x%d 1x1 with a pipeline: the pipeline runs on 1x1 1x%d"):format(
        world - 1, world - 1), train({ layout = other }))
      local plain = slapo.build(scheduled(layout), { pipeline = { meshes = layout.meshes, micro_batches = 2 } })
      if layout.dp > 1 then  -- (the stage of one rank has no replicas to combine: it would train)
        matches("this rank's pipeline stage runs on the replicas {.*}, and nothing combines their gradients: build "
          .. "the pipeline with.*zero_adamw",
          pcall_err(slapo.train, { model = plain, layout = layout, data = function() return batch(4) end, steps = 1,
            quiet = true }))
      end
    end
    local sch = slapo.create_schedule(build())
    parallel.cut_evenly(sch, "transformer.h", world)
    local one_layout = parallel.layout({ pp = world })
    local plain = slapo.build(sch, { pipeline = { group = one_layout.pp_group, micro_batches = 2 } })
    matches("a layout of stage meshes with a pipeline: build the pipeline with {pipeline = {meshes = layout.meshes}}",
      pcall_err(slapo.train, { model = plain, layout = layout, data = function() return batch(4) end, steps = 1,
        quiet = true }))
  end)
end)
