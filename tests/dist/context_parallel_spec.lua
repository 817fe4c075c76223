-- context_parallel: each rank of the group is given whole rows, keeps its share of every sequence
-- (with causal load balance, chunks r and 2N-1-r of 2N), attends over every rank's keys by ring
-- attention, and reports the whole sequence's loss; with the gradients averaged over the group it
-- trains as one process on the whole sequences.
local parallel = require("slapo.parallel")
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local function llama(extra)
  local cfg = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 64, max_position_embeddings = 1024 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  slapo.manual_seed(3)
  return slapo.models.llama(cfg)
end

-- GPT-2 without dropout (ring attention applies none): learned positions, by global index
local function gpt2()
  slapo.manual_seed(3)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 512,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
end

-- `rows` rows of `seq` tokens, the same on every rank
local function batch(rows, seq)
  slapo.manual_seed(9)
  return slapo.randint(0, 64, { rows, seq })
end

local function named(model)
  local out = {}
  for name, p in model:named_parameters() do out[name] = p end
  return out
end

-- This rank's tokens of `t` [B, seq, ...]: chunk r of N, or chunks r and 2N-1-r of 2N.
local function my_tokens(t, n, r, balanced)
  local chunks = balanced and 2 * n or n
  local chunk = t:size()[2] / chunks
  if not balanced then return t:narrow(1, r * chunk, chunk) end
  return slapo.cat({ t:narrow(1, r * chunk, chunk), t:narrow(1, (chunks - 1 - r) * chunk, chunk) }, 1)
end

local packed_positions = reference.packed_positions

-- 3 AdamW steps of the split model (gradients averaged over `layout`'s DP group) beside one process
-- on the same rows: losses to 1e-5 relative, then gradients and weights (AdamW's rounding after 3
-- steps of lr 1e-2). `opts.positions`: the rows' position_ids (packed documents), given to both.
local function trains_as_one_process(layout, schedule, seq, opts)
  local ids = batch(2, seq)
  local kw = { labels = ids, position_ids = opts.positions }
  local build = opts.model or llama
  local ref = build()
  local sch = slapo.create_schedule(build(), { group = layout.tp_group })
  if schedule then schedule(sch) end
  sch:context_parallel({ group = layout.cp_group, load_balance = opts.load_balance, score_mib = opts.score_mib,
    method = opts.method })
  local model = slapo.build(sch)
  local adamw = { slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 }),
    slapo.optim.adamw(model, { lr = 1e-2, weight_decay = 0 }) }
  for step = 1, 3 do
    adamw[1]:zero_grad()
    adamw[2]:zero_grad()
    local expected = ref(ids, kw)
    expected:backward()
    local loss = model(ids, kw)
    loss:backward()
    assert(math.abs(loss:item() - expected:item()) < 1e-5 * expected:item(),
      ("step %d: loss %.7f in one process, %.7f split over %d ranks"):format(step, expected:item(), loss:item(),
        layout.cp))
    layout:all_reduce_grads(model)
    if layout.tp == 1 then
      local theirs = named(ref)
      -- each rank sums its part of every gradient: float32 rounding of a different order, a few 1e-6
      for name, p in model:named_parameters() do close(theirs[name].grad, p.grad, { rtol = 1e-4, atol = 5e-6 }) end
    end
    adamw[1]:step()
    adamw[2]:step()
  end
  if layout.tp == 1 then
    -- AdamW divides by each gradient's own scale, so near-zero gradients' rounding moves their
    -- updates by up to 1e-2 of lr = 1e-2 (7e-5 seen on GPT-2's; the gradients above agree each step)
    local theirs = named(ref)
    for name, p in model:named_parameters() do close(theirs[name], p, { rtol = 1e-4, atol = 1e-4 }) end
  end
end

-- slapo.train's 3 steps of LLaMA on `data`, split over every rank as one cp group, beside one process:
-- the losses to 1e-5 relative.
local function trains_in_slapo_train_as_one_process(data)
  local ref = slapo.train({ model = llama(), steps = 3, data = data, quiet = true })
  local layout = parallel.layout({ cp = world })
  local sch = slapo.create_schedule(llama())
  sch:context_parallel({ group = layout.cp_group })
  local result = slapo.train({ model = slapo.build(sch), layout = layout, steps = 3, data = data, quiet = true })
  for step = 1, 3 do
    assert(math.abs(result.losses[step] - ref.losses[step]) < 1e-5 * ref.losses[step],
      ("step %d: %.7f in one process, %.7f split"):format(step, ref.losses[step], result.losses[step]))
  end
end

describe("context_parallel", function()
  it("keeps this rank's load-balanced chunks of every sequence: their logits are the whole model's", function()
    local ids = batch(2, 64)
    local sch = slapo.create_schedule(llama())
    sch:context_parallel()
    local whole = llama()(ids)
    local logits = slapo.build(sch)(ids)
    eq({ 2, 64 / world, 64 }, logits:size())
    close(my_tokens(whole, world, rank, true), logits, { rtol = 1e-4, atol = 1e-5 })
    matches("context_parallel%(%)", sch:log())
  end)

  it("keeps one contiguous chunk without load balance", function()
    local ids = batch(2, 64)
    local sch = slapo.create_schedule(llama())
    sch:context_parallel({ load_balance = false })
    close(my_tokens(llama()(ids), world, rank, false), slapo.build(sch)(ids),
      { rtol = 1e-4, atol = 1e-5 })
  end)

  it("trains as one process over 3 AdamW steps at sequence 512, load-balanced", function()
    trains_as_one_process(parallel.layout({ cp = world }), nil, 512, { load_balance = true })
  end)

  it("trains as one process with each block's queries taken a few rows at a time (score_mib)", function()
    -- 0.1 MiB of scores: about 25 rows of 2 x 4 heads against a block of 512 / N keys, many chunks a step
    trains_as_one_process(parallel.layout({ cp = world }), nil, 512, { load_balance = true, score_mib = 0.1 })
  end)

  it("trains GPT-2 as one process: learned positions by global index, 3 AdamW steps at sequence 256", function()
    trains_as_one_process(parallel.layout({ cp = world }), nil, 256, { load_balance = true, model = gpt2 })
  end)

  it("trains as one process over 3 AdamW steps at sequence 512, in contiguous chunks", function()
    trains_as_one_process(parallel.layout({ cp = world }), nil, 512, { load_balance = false })
  end)

  if world == 4 then
    it("composes with tensor parallelism: tp 2 x cp 2 (LLaMA's Megatron schedule splits the heads)", function()
      trains_as_one_process(parallel.layout({ tp = 2, cp = 2 }), function(sch)
        require("slapo.schedules.llama").schedule(sch)
      end, 256, { load_balance = true })
      -- and with packed documents
      trains_as_one_process(parallel.layout({ tp = 2, cp = 2 }), function(sch)
        require("slapo.schedules.llama").schedule(sch)
      end, 256, { positions = packed_positions({ { 100, 56, 100 }, { 3, 253 } }) })
    end)

    -- Megatron's sequence parallelism inside TP (the layout slapo.autoshard{sequence = true} writes for
    -- LLaMA's layer): a cp rank's tokens split again over its TP group between attention's projections
    it("composes with sequence parallelism inside TP: tp 2 x cp 2, each cp rank's tokens split over TP", function()
      local function sequence_parallel(sch)
        for _, layer in ipairs(sch["model.layers"]:children()) do
          layer:sync("fwd_pre", "scatter", { axis = 1 })
          for _, name in ipairs({ "q_proj", "k_proj", "v_proj" }) do layer["self_attn." .. name]:shard("weight", 0) end
          layer["self_attn.o_proj"]:shard("weight", 1):sync("fwd_post", "reduce_scatter", { axis = 1 })
          layer["self_attn"]:sync("fwd_pre", "all_gather", { axis = 1, grad = "reduce_scatter" })
          for _, name in ipairs({ "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "input_layernorm",
            "post_attention_layernorm" }) do
            layer[name]:sync("bwd_params", "all_reduce")  -- whole weights on this rank's tokens
          end
          layer:sync("fwd_post", "all_gather", { axis = 1 })
        end
      end
      trains_as_one_process(parallel.layout({ tp = 2, cp = 2 }), sequence_parallel, 256, { load_balance = true })
      trains_as_one_process(parallel.layout({ tp = 2, cp = 2 }), sequence_parallel, 256,
        { method = "all_to_all", positions = packed_positions({ { 100, 56, 100 }, { 3, 253 } }) })
    end)
  end

  -- DeepSpeed-Ulysses: all-to-all over heads. LLaMA's 2 key/value heads travel unrepeated on 2
  -- ranks and are repeated to its 4 query heads on 4
  it("keeps its chunks with all_to_all (Ulysses): their logits are the whole model's", function()
    local ids = batch(2, 64)
    for _, balanced in ipairs({ true, false }) do
      local sch = slapo.create_schedule(llama())
      sch:context_parallel({ method = "all_to_all", load_balance = balanced })
      close(my_tokens(llama()(ids), world, rank, balanced), slapo.build(sch)(ids), { rtol = 1e-4, atol = 1e-5 })
      matches('method = "all_to_all"', sch:log())
      matches("already splits its sequence %(all%-to%-all attention %(Ulysses%)", pcall_err(sch.context_parallel, sch))
    end
  end)

  it("trains as one process with all_to_all over 3 AdamW steps at sequence 512, load-balanced and not", function()
    trains_as_one_process(parallel.layout({ cp = world }), nil, 512, { load_balance = true, method = "all_to_all" })
    trains_as_one_process(parallel.layout({ cp = world }), nil, 512, { load_balance = false, method = "all_to_all",
      score_mib = 0.1 })
  end)

  it("trains GPT-2 as one process with all_to_all at sequence 256", function()
    trains_as_one_process(parallel.layout({ cp = world }), nil, 256, { model = gpt2, method = "all_to_all" })
  end)

  if world == 4 then
    it("composes all_to_all with tensor parallelism: tp 2 x cp 2 (each rank's 2 heads over 2 ranks)", function()
      trains_as_one_process(parallel.layout({ tp = 2, cp = 2 }), function(sch)
        require("slapo.schedules.llama").schedule(sch)
      end, 256, { load_balance = true, method = "all_to_all" })
    end)
  end

  -- Mistral's sliding window: a query sees the keys less than `window` positions back. 12 tokens
  -- fall inside every chunk of 128 / 2N (some rows see a whole other chunk, some none of it); 40
  -- reach over a chunk's edge into the one before
  it("trains Mistral's sliding window as one process, by the ring and by all_to_all", function()
    for _, window in ipairs({ 12, 40 }) do
      local function mistral()
        slapo.manual_seed(3)
        return slapo.models.mistral({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
          num_key_value_heads = 2, intermediate_size = 64, vocab_size = 64, max_position_embeddings = 256,
          sliding_window = window })
      end
      for _, method in ipairs({ "ring", "all_to_all" }) do
        trains_as_one_process(parallel.layout({ cp = world }), nil, 128,
          { model = mistral, method = method, score_mib = 0.01 })
      end
    end
  end)

  -- Packed documents kept apart by position_ids (each row its own cuts, some inside a rank's chunk,
  -- some on a chunk's edge): every rank gets the whole rows' positions, RoPE takes its tokens', and
  -- attention masks keys of other documents, by the ring and by all_to_all, plain and windowed
  it("keeps packed documents apart (position_ids) as one process does, by the ring and by all_to_all", function()
    local positions = packed_positions({ { 50, 30, 48 }, { 16, 100, 12 } })
    local ids = batch(2, 128)
    local plain, apart = llama()(ids), llama()(ids, { position_ids = positions })
    assert((plain - apart):abs():max():item() > 1e-3, "the documents change nothing: the case tests nothing")
    for _, method in ipairs({ "ring", "all_to_all" }) do
      trains_as_one_process(parallel.layout({ cp = world }), nil, 128,
        { method = method, positions = positions, score_mib = 0.01 })
    end
    local function mistral()
      slapo.manual_seed(3)
      return slapo.models.mistral({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
        num_key_value_heads = 2, intermediate_size = 64, vocab_size = 64, max_position_embeddings = 256,
        sliding_window = 40 })
    end
    trains_as_one_process(parallel.layout({ cp = world }), nil, 128, { model = mistral, positions = positions })
  end)

  it("trains documents kept apart with slapo.train (a data function's positions): one process's losses", function()
    -- what a token file with documents = "separate" hands the loop: the rows and their positions
    local ids, positions = batch(2, 128), packed_positions({ { 50, 30, 48 }, { 16, 100, 12 } })
    trains_in_slapo_train_as_one_process(function() return ids, positions end)
  end)

  it("trains with slapo.train on a layout's cp group: the losses one process gets", function()
    eq(1, parallel.layout({ cp = world }).data_replicas)
    trains_in_slapo_train_as_one_process({ vocab = 64, batch = 2, seq = 128 })
  end)

  -- torchtitan's layout: the weights fully sharded (or AdamW's moments sliced, ZeRO-1) over the
  -- cp x dp ranks, each cp group's ranks taking the same rows
  if world == 4 then
    it("composes with fully_shard and ZeRO-1 over the cp x dp ranks: slapo.train's losses one process gets", function()
      local all = batch(2, 128)
      local ref = slapo.train({ model = llama(), steps = 3, quiet = true, optimizer = "adamw", lr = 1e-2,
        data = function() return all end })
      local layout = parallel.layout({ cp = 2 })
      eq({ 4, 2 }, { layout.dp, layout.data_replicas })
      local mine = all:narrow(0, layout.data_replica, 1)  -- this cp group's row
      local data = function() return mine end
      for _, sharding in ipairs({ "fully_shard", "zero_adamw" }) do
        local sch = slapo.create_schedule(llama())
        sch:context_parallel({ group = layout.cp_group })
        if sharding == "fully_shard" then
          for _, layer in ipairs(sch["model.layers"]:children()) do layer:fully_shard({ group = layout.dp_group }) end
          sch:fully_shard({ group = layout.dp_group })
          assert(#sch.mod:fully_sharded_parameters() == #llama():parameters(), "every parameter a slice")
        end
        local result = slapo.train({ model = slapo.build(sch), layout = layout, steps = 3, data = data, quiet = true,
          optimizer = sharding == "zero_adamw" and "zero_adamw" or "adamw", lr = 1e-2 })
        for step = 1, 3 do
          assert(math.abs(result.losses[step] - ref.losses[step]) < 1e-5 * ref.losses[step],
            ("%s, step %d: %.7f in one process, %.7f split"):format(sharding, step, ref.losses[step],
              result.losses[step]))
        end
        assert(ref.losses[3] < ref.losses[1] - 0.05, "the steps move the weights")
      end
      -- verify sees fully_shard's slices averaged over the cp x dp ranks: outputs and the loss
      for _, example in ipairs({ { batch(2, 64) }, { batch(2, 64), { labels = batch(2, 64) } } }) do
        local report = slapo.verify(slapo.create_schedule(llama()), example, function(s)
          s:context_parallel({ group = layout.cp_group })
          for _, layer in ipairs(s["model.layers"]:children()) do layer:fully_shard({ group = layout.dp_group }) end
          s:fully_shard({ group = layout.dp_group })
        end)
        eq(#llama():parameters(), report.gradients)
      end
    end)
  end

  it("verifies against the unscheduled model: this rank's tokens' logits, the loss, every gradient", function()
    local layout = parallel.layout({ cp = world })
    for _, example in ipairs({ { batch(2, 64) }, { batch(2, 64), { labels = batch(2, 64) } } }) do
      local report = slapo.verify(slapo.create_schedule(llama()), example, function(s)
        s:context_parallel({ group = layout.cp_group })
      end)
      eq(1, report.outputs)
      eq(#llama():parameters(), report.gradients)
    end
    -- a change to one rank's gradients only is found
    local err = pcall_err(slapo.verify, slapo.create_schedule(llama()), { batch(2, 64) }, function(s)
      s:context_parallel({ group = layout.cp_group })
      if rank == 1 then
        s["model.layers.1.mlp"]:sync("fwd_post", function(y) return y:detach() + (y - y:detach()) * 2 end)
      end
    end)
    matches("verify: the gradient of 'model%.[%w._]+' differs", err)
  end)

  it("refuses by name what it cannot split, and changes nothing", function()
    local sch = slapo.create_schedule(llama())
    matches("context_parallel: method 'ulysses' is not one %(.*; choices: ring, all_to_all%)",
      pcall_err(sch.context_parallel, sch, { method = "ulysses" }))
    -- all_to_all splits the heads over the ranks: 3 do not split over 2 or 4
    local three = slapo.create_schedule(llama({ hidden_size = 24, num_attention_heads = 3, num_key_value_heads = 3 }))
    matches(('method "all_to_all" splits attention\'s heads over the %d ranks .* has 3 heads, which do not divide %%(a '
      .. 'group of a size dividing 3, or method = "ring"%%)'):format(world),
      pcall_err(three.context_parallel, three, { method = "all_to_all" }))
    assert(not three:log():find("context_parallel"), "the refusal changed nothing")
    matches("context_parallel: .*model%.layers%.0.* is not the model's root",
      pcall_err(sch["model.layers.0"].context_parallel, sch["model.layers.0"]))
    matches("context_parallel: .* is a BertLMHeadModel; ring attention is written for GPT%-2 and LLaMA%-family",
      pcall_err(function()
        slapo.create_schedule(slapo.models.bert({ hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2,
          intermediate_size = 64, vocab_size = 64, is_decoder = true })):context_parallel()
      end))
    matches("transformer%.h%.0%.attn drops attention probabilities %(attn_pdrop 0%.1%), which ring attention does not",
      pcall_err(function()
        slapo.create_schedule(slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64 })):context_parallel()
      end))
    assert(not sch:log():find("context_parallel"), "the refusals changed nothing")
    -- a sequence that does not cut into 2N chunks, and keywords it does not split
    sch:context_parallel()
    local model = slapo.build(sch)
    local odd = batch(1, 2 * world + 2)
    matches(("LlamaForCausalLM: context_parallel over %d ranks cuts a sequence into %d chunks %%(two a rank, for causal "
      .. "load balance%%); %d tokens do not divide"):format(world, 2 * world, 2 * world + 2),
      pcall_err(function() return model(odd) end))
    local ids = batch(1, 16)
    matches("attention_mask", pcall_err(function() return model(ids, { attention_mask = ids }) end))
    -- position_ids are the whole rows' (every rank is given them), not this rank's tokens'
    matches("LlamaModel: position_ids must be int64 of the whole rows' shape %[1, 16%], got Long %[1, " .. 16 / world,
      pcall_err(function() return model(ids, { position_ids = my_tokens(ids, world, rank, true) }) end))
    matches("position_ids", pcall_err(function()
      local g = slapo.create_schedule(gpt2())
      g:context_parallel()
      return slapo.build(g)(ids, { position_ids = ids })
    end))
    matches("already splits its sequence %(ring attention over", pcall_err(sch.context_parallel, sch))
    -- slapo.train: the split model needs the layout whose cp group splits it
    matches(("train: the model splits its sequences over ranks {%s}"):format(world == 2 and "0, 1" or "0, 1, 2, 3"),
      pcall_err(slapo.train, { model = model, steps = 1, quiet = true, data = { vocab = 64, batch = 1, seq = 16 } }))
    matches("train: the layout has cp = 2 .* but the model does not split its sequences",
      pcall_err(slapo.train, { model = llama(), steps = 1, quiet = true, layout = parallel.layout({ cp = 2 }),
        data = { vocab = 64, batch = 1, seq = 16 } }))
    matches("parallel.layout: cp = 3 does not divide", pcall_err(parallel.layout, { cp = 3 }))
    matches("score_mib", pcall_err(sch.context_parallel, slapo.create_schedule(llama()), { score_mib = 0 }))
    -- cp groups of consecutive ranks; the rows split over dp / cp data replicas
    local pairs_of = parallel.layout({ cp = 2 })
    eq({ rank - rank % 2, rank - rank % 2 + 1 }, pairs_of.cp_ranks)
    eq(world / 2, pairs_of.data_replicas)
    eq(math.floor(rank / 2), pairs_of.data_replica)
    matches("cp group {", tostring(pairs_of))
  end)
end)
