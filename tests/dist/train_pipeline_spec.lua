-- slapo.train of a pipeline: each step one pipe:step, with train's learning-rate schedule, clipping
-- (the whole model's norm, a weight tied across stages counted once) and metrics. On 2 ranks, pp 2
-- (GPT-2, whose embedding and LM head are one weight on both stages, and cut in 4 interleaved; LLaMA
-- with packed documents); on 4, pp 2 x dp 2 with AdamW and ZeRO (averaged by the pipeline, or by
-- ZeRO), and pp 2 x tp 2. 3 steps equal to one process in loss, gradient norm and every weight;
-- refusals by name.
local parallel = require("slapo.parallel")
local step_flops = require("slapo.step_flops")
local world = slapo.dist.world_size()
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local gpt2_sizes = { n_layer = 2 }

-- The tiny GPT-2 cut in 2 after its first layer, built as a pipeline of `layout`'s ranks.
local function gpt2_pipeline(layout, options)
  local sch = slapo.create_schedule(reference.tiny_gpt2(gpt2_sizes))
  parallel.cut_evenly(sch, "transformer.h", 2)
  local pipeline = { group = layout.pp_group, micro_batches = 2 }
  for key, value in pairs(options or {}) do pipeline[key] = value end
  return slapo.build(sch, { pipeline = pipeline })
end

-- Raises unless each of this rank's weights equals the one-process model's, or another pipeline's
-- (AdamW's rounding shows as about 1e-5 after 3 steps of lr 1e-2).
local function same_weights(pipe, ref)
  local theirs, compared = reference.named(ref), 0
  for name, p in pipe:named_parameters() do
    close(theirs[name], p, { rtol = 1e-4, atol = 5e-5 })
    compared = compared + 1
  end
  assert(compared >= 6, "compared " .. compared .. " weights")
end

-- Raises unless each of a 2-stage pipeline's ranks counts half the whole GPT-2's FLOPs for a row of 8.
local function flops_as_whole_model(pipe)
  local whole = step_flops.per_row(reference.tiny_gpt2(gpt2_sizes))(8)
  local mine = step_flops.pipeline_per_row(pipe)(8)
  assert(math.abs(2 * mine - whole) < 1e-9 * whole, ("2 x %.0f FLOPs a rank, %.0f the whole model"):format(mine, whole))
end

local function train(pipe, layout, data, options)
  local opts = { model = pipe, layout = layout, data = data, steps = 3, lr = 1e-2, schedule = "constant",
    clip = 0.05, quiet = true }
  for key, value in pairs(options or {}) do opts[key] = value end
  return slapo.train(opts)
end

describe("slapo.train of a pipeline", function()
  if world == 2 then
    it("trains GPT-2 on 2 stages as one process: loss, the tied weight's norm counted once, every weight", function()
      local layout = parallel.layout({ pp = 2 })
      local all = reference.rows()
      local ref, losses, norms = reference.train(all, 3, 0.05, nil, gpt2_sizes)
      local pipe = gpt2_pipeline(layout)
      local result = train(pipe, layout, function() return all end)
      reference.check_steps(result, losses, norms)
      same_weights(pipe, ref)
      eq(pipe, result.model)
      -- the tied embedding: summed on both stages, counted by the first alone
      eq(slapo.dist.rank() == 0 and {} or { "transformer.wte.weight" }, pipe:shared_counted_elsewhere())
    end)

    it("trains GPT-2 cut in 4 on 2 ranks (interleaved 1F1B) as one process, clipped by the whole norm", function()
      local sizes = { n_layer = 4 }
      local layout = parallel.layout({ pp = 2 })
      local all = reference.rows()
      local ref, losses, norms = reference.train(all, 3, 0.05, nil, sizes)
      local sch = slapo.create_schedule(reference.tiny_gpt2(sizes))
      parallel.cut_evenly(sch, "transformer.h", 4)
      local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2 } })
      reference.check_steps(train(pipe, layout, function() return all end), losses, norms)
      same_weights(pipe, ref)
      eq(slapo.dist.rank() == 0 and {} or { "transformer.wte.weight" }, pipe:shared_counted_elsewhere())
    end)

    it("counts the pipeline's FLOPs as the whole model's, shared over its ranks", function()
      local layout = parallel.layout({ pp = 2 })
      local pipe = gpt2_pipeline(layout)
      local ids = reference.rows()
      pipe:prepare(ids)
      flops_as_whole_model(pipe)
    end)

    it("trains LLaMA on 2 stages with packed documents as one process", function()
      local function llama()
        slapo.manual_seed(21)
        return slapo.models.llama({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
          num_key_value_heads = 2, intermediate_size = 64, vocab_size = 64, max_position_embeddings = 64,
          initializer_range = 0.15 })
      end
      slapo.manual_seed(9)
      local ids = slapo.randint(0, 64, { 4, 32 })
      local positions = reference.packed_positions({ { 20, 12 }, { 8, 8, 16 }, { 5, 27 }, { 32 } })
      local data = function() return ids, positions end
      local one = slapo.train({ model = llama(), data = data, steps = 3, lr = 1e-2, schedule = "constant", clip = 0.05,
        quiet = true })
      local layout = parallel.layout({ pp = 2 })
      local sch = slapo.create_schedule(llama())
      parallel.cut_evenly(sch, "model.layers", 2)
      local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2 } })
      local result = train(pipe, layout, data)
      assert(one.grad_norms[1] > 0.05, "the clip acts")
      reference.check_steps(result, one.losses, one.grad_norms)
      same_weights(pipe, one.model)
    end)

    it("resumes from its checkpoint as the run that never stopped, and a whole model reads it back", function()
      local layout = parallel.layout({ pp = 2 })
      local all = reference.rows()
      local data = function() return all end
      local dir = "/tmp/slapo-pipeline-checkpoints-" .. os.getenv("MASTER_PORT")
      local straight = gpt2_pipeline(layout)
      local through = train(straight, layout, data)
      train(gpt2_pipeline(layout), layout, data, { steps = 2, checkpoint_dir = dir, checkpoint_every = 2 })
      local pipe = gpt2_pipeline(layout)
      local resumed = train(pipe, layout, data, { checkpoint_dir = dir })
      eq(3, resumed.first_step)
      for _, key in ipairs({ "losses", "grad_norms" }) do
        assert(math.abs(resumed[key][3] - through[key][3]) < 1e-6 * through[key][3],
          ("step 3's %s: %.9f resumed, %.9f straight through"):format(key, resumed[key][3], through[key][3]))
      end
      same_weights(pipe, straight)
      -- the stages' pieces make the whole model: one process's 2 steps, tied head included
      local whole = reference.tiny_gpt2(gpt2_sizes)
      local step = require("slapo.checkpoint").load(dir .. "/step-000002", whole,
        slapo.optim.adamw(whole, { lr = 1e-2, weight_decay = 0 }))
      eq(2, step)
      local two = reference.train(all, 2, 0.05, nil, gpt2_sizes)
      for name, p in pairs(two:state_dict()) do
        close(p, whole:state_dict()[name], { rtol = 1e-4, atol = 5e-5 })
      end
      slapo.dist.barrier()
      if slapo.dist.rank() == 0 then os.execute("rm -rf '" .. dir .. "'") end
    end)

    it("refuses what it does not do with a pipeline, by name", function()
      local layout = parallel.layout({ pp = 2 })
      local pipe = gpt2_pipeline(layout)
      local data = { vocab = 64, batch = 4, seq = 8 }
      matches("grad_accum = 2 with a pipeline.*micro_batches", pcall_err(function()
        train(pipe, layout, data, { grad_accum = 2 }) end))
      matches("autocast = \"fp16\" with a pipeline.*bf16", pcall_err(function()
        train(pipe, layout, data, { autocast = "fp16" }) end))
      matches("masked_lm with a pipeline", pcall_err(function()
        train(pipe, layout, data, { masked_lm = { mask_id = 1 } }) end))
      matches("zero_adamw without a layout with a pipeline", pcall_err(function()
        train(pipe, nil, data, { optimizer = "zero_adamw" }) end))
      local sch = slapo.create_schedule(reference.tiny_gpt2(gpt2_sizes))
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ group = layout.dp_group }) end
      parallel.cut_evenly(sch, "transformer.h", 2)
      local sliced = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2 } })
      matches("zero_adamw and fully_shard %(transformer.h.%d.*%) with a pipeline.*use optimizer = \"adamw\"",
        pcall_err(function() train(sliced, layout, data, { optimizer = "zero_adamw" }) end))
      -- a layout whose pipeline is another: the ranks named, and how to build it
      matches("the pipeline runs on ranks {0, 1}, but the layout's pp group is {" .. slapo.dist.rank()
        .. "}.*layout.pp_group",
        pcall_err(function() train(pipe, parallel.layout({ dp = 2 }), data) end))
      matches("clip_grad_norm: .*stages are not known", pcall_err(function() slapo.clip_grad_norm(pipe, 1) end))
      -- a model without position_ids given packed documents; a batch of another shape at step 2
      local ids = reference.rows()
      matches("data.documents = \"separate\" hands the model position_ids, and GPT2LMHeadModel takes none",
        pcall_err(function() train(pipe, layout, function() return ids, reference.packed_positions({ { 4, 4 }, { 8 },
          { 8 }, { 8 } }) end) end))
      matches("train: step 2: the pipeline failed on the batch %(token ids of shape %[2, 8%]%): .*need a new trace",
        pcall_err(function()
          train(pipe, layout, function(step) return step == 1 and ids or ids:narrow(0, 0, 2) end)
        end))
    end)
  end

  if world == 4 then
    -- `averaging`: the pipeline's dp_group, or false for none (ZeRO averages in its step, train
    -- before clipping)
    local function pp2_dp2(optimizer, averaging)
      local layout = parallel.layout({ pp = 2, dp = 2 })
      local all = reference.rows()  -- 8 rows: 4 a replica
      local ref, losses, norms, adamw = reference.train(all, 3, 0.05, nil, gpt2_sizes)
      local pipe = gpt2_pipeline(layout, { dp_group = averaging ~= false and layout.dp_group or nil })
      local result = train(pipe, layout, function() return all:narrow(0, 4 * layout.dp_rank, 4) end,
        { optimizer = optimizer })
      reference.check_steps(result, losses, norms)
      same_weights(pipe, ref)
      reference.same_first_moments(result.optimizer, pipe, adamw, ref, layout.dp_group, "pp 2 x dp 2, " .. optimizer)
    end

    it("trains GPT-2 on 2 stages x 2 replicas as one process on all the rows (AdamW)", function()
      pp2_dp2("adamw")
    end)

    it("trains GPT-2 on 2 stages x 2 replicas as one process on all the rows (ZeRO's AdamW)", function()
      pp2_dp2("zero_adamw")
    end)

    it("trains GPT-2 on 2 stages x 2 replicas as one process, ZeRO averaging them (no pipeline dp_group)", function()
      pp2_dp2("zero_adamw", false)
    end)

    it("counts fully sharded stages' FLOPs at their whole parameters", function()
      local layout = parallel.layout({ pp = 2, dp = 2 })
      local sch = slapo.create_schedule(reference.tiny_gpt2(gpt2_sizes))
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ group = layout.dp_group }) end
      parallel.cut_evenly(sch, "transformer.h", 2)
      local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, dp_group = layout.dp_group,
        micro_batches = 2 } })
      pipe:prepare(reference.rows():narrow(0, 0, 4))
      assert(pipe:num_params({ gathered = true }) > pipe:num_params(), "the blocks are sliced")
      flops_as_whole_model(pipe)
    end)

    -- one step: later ones drift apart with TP's rounding, which AdamW amplifies
    it("clips GPT-2 on 2 stages of 2 tensor-parallel ranks by the whole model's norm", function()
      local layout = parallel.layout({ pp = 2, tp = 2 })
      local all = reference.rows()
      local _, losses, norms = reference.train(all, 1, 0.05, nil, gpt2_sizes)
      local sch = slapo.create_schedule(reference.tiny_gpt2(gpt2_sizes), { group = layout.tp_group })
      require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
      parallel.cut_evenly(sch, "transformer.h", 2)
      local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2 } })
      assert(#sch.mod:shard_groups() > 0, "the stages are split over their tp ranks")
      reference.check_steps(train(pipe, layout, function() return all end, { steps = 1 }), losses, norms)
    end)

    it("refuses a pipeline that does not average over the layout's replicas", function()
      local layout = parallel.layout({ pp = 2, dp = 2 })
      local pipe = gpt2_pipeline(layout)
      matches("averages its gradients over no replicas %(no pipeline.dp_group%), but the layout's dp group is "
        .. "{%d, %d}.*dp_group = layout.dp_group",
        pcall_err(function() train(pipe, layout, { vocab = 64, batch = 4, seq = 8 }) end))
      -- replicas where the layout has none: the tp ranks averaged as if they held the same rows
      local tp_layout = parallel.layout({ pp = 2, tp = 2 })
      local wrong = gpt2_pipeline(tp_layout, { dp_group = tp_layout.tp_group })
      matches("averages its gradients over the replicas {%d, %d}, but the layout's dp group is none",
        pcall_err(function() train(wrong, tp_layout, { vocab = 64, batch = 4, seq = 8 }) end))
    end)
  end
end)
