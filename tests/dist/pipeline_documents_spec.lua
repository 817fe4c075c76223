-- Packed documents reaching a pipeline: position_ids (each document starting again at 0) given to
-- pipe:step beside the ids reach every stage, which keeps the documents apart as one process does.
-- On 2 ranks, pp 2 (1F1B, GPipe, and 4 stages interleaved), a pipeline.loss of one's own averaged
-- as it is, and a Mixtral's load-balancing loss beside the positions; on 4, pp 2 x cp 2 by the ring and by all_to_all, and stages on meshes of 2 replicas. 3 AdamW steps equal to one process in loss and every gradient; slapo.verify
-- of the pipeline with them.
local parallel = require("slapo.parallel")
local world = slapo.dist.world_size()
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local function llama()
  slapo.manual_seed(21)
  return slapo.models.llama({ hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4,
    num_key_value_heads = 2, intermediate_size = 64, vocab_size = 64, max_position_embeddings = 256,
    initializer_range = 0.15 }) -- weights large enough that attention, so the documents, move the loss
end

local packed_positions = reference.packed_positions

-- 4 rows of 64 tokens, the same on every rank, in documents cut at different places in each row
-- (some on a micro-batch's or a cp chunk's edge, some inside; the last row 32 documents of 2
-- tokens); labels -100 where a document starts, as slapo.train gives them (no token learns to
-- predict the next document's first), so the two micro-batches train 123 and 92 tokens.
local function packed_batch()
  slapo.manual_seed(9)
  local ids = slapo.randint(0, 64, { 4, 64 })
  local pairs_of_tokens = {}
  for i = 1, 32 do pairs_of_tokens[i] = 2 end
  local positions = packed_positions({ { 20, 44 }, { 16, 16, 32 }, { 5, 50, 9 }, pairs_of_tokens })
  local starts = positions:eq(0):long()
  return ids, positions, (ids - (ids + 100) * starts):long()
end

-- One process's loss on the whole batch: the mean over every trained token, which the pipeline's
-- micro-batches (each training another number of tokens) give by their weights.
local function whole_batch_loss(model, ids, positions, labels)
  return model(ids, { labels = labels, position_ids = positions })
end

local function trains_as_one_process(layout, sch, where)
  local ids, positions, labels = packed_batch()
  local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, dp_group = layout.dp_group, micro_batches = 2,
    schedule = where:find("gpipe") and "gpipe" or "1f1b" } })
  local ref = llama()
  local first = reference.pipeline_steps_as_one_process(pipe, ref, ids, where, { labels = labels,
    keywords = { position_ids = positions }, expected = function() return whole_batch_loss(ref, ids, positions, labels) end })
  -- the documents kept apart: far nearer one process's loss with them than without
  local apart = whole_batch_loss(llama(), ids, positions, labels):item()
  local joined = whole_batch_loss(llama(), ids, packed_positions({ { 64 }, { 64 }, { 64 }, { 64 } }), labels):item()
  assert(math.abs(first - apart) < math.abs(joined - apart) / 10,
    ("step 1: %.9f pipelined, %.9f in one process with the documents, %.9f without"):format(first, apart, joined))
  -- each micro-batch weighed by its tokens: the plain mean of the two micro-batches' means is another number
  local model, halves = llama(), {}
  for m = 0, 1 do
    local part = function(t) return t:narrow(0, 2 * m, 2) end
    halves[m + 1] = whole_batch_loss(model, part(ids), part(positions), part(labels)):item()
  end
  local unweighted = (halves[1] + halves[2]) / 2
  assert(math.abs(first - apart) < math.abs(unweighted - apart) / 10,
    ("step 1: %.9f pipelined, %.9f over every token, %.9f the micro-batches' plain mean"):format(first, apart, unweighted))
end

describe("pipelines with packed documents (position_ids)", function()
  if world == 2 then
    for _, schedule in ipairs({ "1f1b", "gpipe" }) do
      it("trains a LLaMA cut in 2 as one process, its documents kept apart (" .. schedule .. ")", function()
        local layout = parallel.layout({ pp = 2 })
        local sch = slapo.create_schedule(llama())
        parallel.cut_evenly(sch, "model.layers", 2)
        trains_as_one_process(layout, sch, "pipelined, " .. schedule)
      end)
    end

    it("verifies against the unscheduled model with the documents' positions", function()
      local layout = parallel.layout({ pp = 2 })
      local ids, positions, labels = packed_batch()
      local report = slapo.verify(slapo.create_schedule(llama()), { ids, { position_ids = positions } },
        { labels = labels, pipeline = { group = layout.pp_group, micro_batches = 2 } },
        function(s) parallel.cut_evenly(s, "model.layers", 2) end)
      eq(1, report.outputs)
      assert(report.gradients > 10, "compared " .. report.gradients .. " gradients")
    end)

    -- the router's load-balancing loss traced beside the documents' positions: both reach the stages
    it("verifies a Mixtral with its load-balancing loss and the documents' positions", function()
      local layout = parallel.layout({ pp = 2 })
      local ids, positions, labels = packed_batch()
      local function mixtral()
        slapo.manual_seed(21)
        return slapo.models.mixtral({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
          num_key_value_heads = 2, intermediate_size = 48, vocab_size = 64, num_local_experts = 4,
          num_experts_per_tok = 2, max_position_embeddings = 256, output_router_logits = true,
          router_aux_loss_coef = 0.5, initializer_range = 0.15 })
      end
      local report = slapo.verify(slapo.create_schedule(mixtral()), { ids, { position_ids = positions } },
        { labels = labels, pipeline = { group = layout.pp_group, micro_batches = 2 } },
        function(s) parallel.cut_evenly(s, "model.layers", 2) end)
      eq(1, report.outputs)
      assert(report.gradients > 10, "compared " .. report.gradients .. " gradients")
      -- the positions matter: without them the loss is another
      local sch = slapo.create_schedule(mixtral())
      parallel.cut_evenly(sch, "model.layers", 2)
      local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2 } })
      local apart = pipe:step(ids, { labels = labels, position_ids = positions })
      local joined = pipe:step(ids, { labels = labels,
        position_ids = packed_positions({ { 64 }, { 64 }, { 64 }, { 64 } }) })
      assert(math.abs(apart - joined) > 1e-4, ("loss %.7f with the documents, %.7f without"):format(apart, joined))
    end)

    it("trains a LLaMA cut in 4 on 2 ranks (interleaved 1F1B) as one process, its documents kept apart", function()
      local layout = parallel.layout({ pp = 2 })
      local sch = slapo.create_schedule(llama())
      parallel.cut_evenly(sch, "model.layers", 4)
      trains_as_one_process(layout, sch, "pipelined, interleaved 1f1b")
    end)

    -- token weights are the pipeline's own causal-LM loss's: a loss of your own is averaged over the
    -- micro-batches as it is (here the mean of the logits, which weights would move)
    it("averages a pipeline.loss of its own over the micro-batches as it is", function()
      local ids, positions, labels = packed_batch()
      local sch = slapo.create_schedule(llama())
      parallel.cut_evenly(sch, "model.layers", 2)
      local pipe = slapo.build(sch, { pipeline = { group = parallel.layout({ pp = 2 }).pp_group, micro_batches = 2,
        loss = function(logits) return logits:mean() end } })
      local loss = pipe:step(ids, { labels = labels, position_ids = positions })
      local want = llama()(ids, { position_ids = positions }):mean():item()
      assert(math.abs(loss - want) < 1e-5 * math.abs(want) + 1e-7, ("loss %.9f, the logits' mean %.9f"):format(loss, want))
    end)

    it("refuses keywords it cannot carry, by name", function()
      local ids, positions = packed_batch()
      local function pipe(model, layers)
        local sch = slapo.create_schedule(model)
        parallel.cut_evenly(sch, layers, 2)
        return slapo.build(sch, { pipeline = { group = parallel.layout({ pp = 2 }).pp_group, micro_batches = 2 } })
      end
      local p = pipe(llama(), "model.layers")
      matches("keyword 'position_ids' must be a tensor of the inputs' 4 rows", pcall_err(function()
        p:step(ids, { labels = ids, position_ids = positions:narrow(0, 0, 2) })
      end))
      matches("holds tensors by name", pcall_err(function() p:step(ids, { labels = ids, position_ids = 3 }) end))
      slapo.manual_seed(3)
      local gpt2 = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 64 })
      matches("unknown keyword 'position_ids' %(valid: labels, attention_mask%)", pcall_err(function()
        pipe(gpt2, "transformer.h"):step(ids, { labels = ids, position_ids = positions })
      end))
    end)
  elseif world == 4 then
    -- stages on meshes of 2 replicas each: every replica's rows train their own number of tokens,
    -- and the step's loss is still the batch's token mean
    it("verifies on stage meshes of 2 replicas each, the documents' tokens counted by replica", function()
      local layout = parallel.stage_layout({ { dp = 2 }, { dp = 2 } })
      local ids, positions, labels = packed_batch()
      local report = slapo.verify(slapo.create_schedule(llama(), { group = layout.tp_group }),
        { ids, { position_ids = positions } },
        { labels = labels, pipeline = { meshes = layout.meshes, dp_group = layout.dp_group, micro_batches = 2 } },
        function(s) parallel.cut_evenly(s, "model.layers", 2) end)
      eq(1, report.outputs)
      assert(report.gradients > 5, "compared " .. report.gradients .. " gradients")
    end)

    for _, method in ipairs({ "ring", "all_to_all" }) do
      it("trains a LLaMA cut in 2 with its sequence split over 2 ranks (" .. method .. "), documents kept apart", function()
        local layout = parallel.layout({ pp = 2, cp = 2 })
        local sch = slapo.create_schedule(llama(), { group = layout.tp_group })
        sch:context_parallel({ group = layout.cp_group, method = method })
        parallel.cut_evenly(sch, "model.layers", 2)
        trains_as_one_process(layout, sch, "pipelined and split by " .. method)
      end)
    end
  else
    it("needs 2 ranks (pp 2) or 4 (pp 2 x cp 2)", function() skip("run with --nproc 2 or 4") end)
  end
end)
