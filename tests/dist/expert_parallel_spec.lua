-- shard_experts: each rank holds num_local_experts / N of every MoE block's experts, tokens travel to
-- their experts' ranks and back by all-to-all, and the model trains as one process on every rank's
-- rows together.
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local function mixtral(extra)
  local cfg = { hidden_size = 32, intermediate_size = 48, num_hidden_layers = 2, num_attention_heads = 4,
    num_key_value_heads = 2, num_local_experts = 4, num_experts_per_tok = 2, vocab_size = 64,
    max_position_embeddings = 16 }
  for k, v in pairs(extra or {}) do cfg[k] = v end
  slapo.manual_seed(3)
  return slapo.models.mixtral(cfg)
end

local function expert_parallel(model)
  local sch = slapo.create_schedule(model)
  for _, layer in ipairs(sch["model.layers"]:children()) do layer["block_sparse_moe"]:shard_experts() end
  return sch
end

-- rows of 8 tokens, 2 a rank: all of them, and this rank's
local function rows()
  slapo.manual_seed(4)
  local all = slapo.randint(0, 64, { 2 * world, 8 })
  return all, all:narrow(0, 2 * rank, 2)
end

local function is_expert(name) return name:find("%.experts%.") ~= nil end

describe("shard_experts", function()
  it("keeps num_local_experts / N experts on each rank, named as in the whole model", function()
    local sch = expert_parallel(mixtral())
    local per = 4 / world
    local held = {}
    for name in sch.mod:named_parameters() do
      local e = name:match("^model%.layers%.0%.block_sparse_moe%.experts%.(%d+)%.w1%.weight$")
      if e then held[#held + 1] = tonumber(e) end
    end
    table.sort(held)
    local want = {}
    for i = 0, per - 1 do want[#want + 1] = rank * per + i end
    eq(want, held)
    local whole = mixtral():num_params()
    local one_expert = 3 * 32 * 48
    eq(whole - 2 * (4 - per) * one_expert, sch.mod:num_params(), "the other experts' weights are not held")
    matches(("experts %d %%.%%. %d here"):format(rank * per, rank * per + per - 1),
      sch["model.layers.0.block_sparse_moe"].mod:describe())
    matches("shard_experts%(%)", sch:log())
  end)

  it("computes what one process computes on all rows, and trains as it does over 5 AdamW steps", function()
    local all, mine = rows()
    local ref, sch = mixtral(), expert_parallel(mixtral())
    local opts = { slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 }),
      slapo.optim.adamw(sch.mod, { lr = 1e-2, weight_decay = 0 }) }
    for step = 1, 5 do
      opts[1]:zero_grad()
      opts[2]:zero_grad()
      local expected = reference.replicas_loss(ref, all, world, { output_router_logits = true })
      expected:backward()
      opts[1]:step()
      local loss = sch.mod(mine, { labels = mine, output_router_logits = true })
      loss:backward()
      -- data parallelism averages what every rank holds whole; the experts averaged their own
      for name, p in sch.mod:named_parameters() do
        if not is_expert(name) then
          local g = p.grad
          slapo.dist.all_reduce(g)
          g:mul_(1 / world)
        end
      end
      opts[2]:step()
      local mean = loss:detach():clone()
      slapo.dist.all_reduce(mean)
      assert(math.abs(mean:item() / world - expected:item()) < 1e-5 * expected:item(),
        ("step %d: mean loss %.7f over the ranks, one process on all rows %.7f"):format(step, mean:item() / world,
          expected:item()))
    end
    local theirs = {}
    for name, p in ref:named_parameters() do theirs[name] = p end
    local compared = 0
    -- the weights: AdamW's first steps move each by about lr x sign(gradient), which turns the
    -- rounding of a different summation order into a few 1e-5 after 5 steps (as fully_shard's)
    for name, p in sch.mod:named_parameters() do
      close(theirs[name], p, { rtol = 1e-4, atol = 5e-5 })
      compared = compared + 1
    end
    assert(compared > 0)
  end)

  -- One process trained 5 AdamW steps on every replica's rows with the same clip, against slapo.train over a
  -- layout with the Mixtral reference schedule: losses, gradient norms (each expert counted once
  -- across the ranks) and every weight this rank holds whole.
  local function trains_as_one_process(layout_opts, schedule_opts, optimizer)
    local parallel = require("slapo.parallel")
    local layout = parallel.layout(layout_opts)
    slapo.manual_seed(4)
    local all = slapo.randint(0, 64, { 2 * layout.dp, 8 })
    local mine = all:narrow(0, 2 * layout.dp_rank, 2)
    local ref = mixtral({ output_router_logits = true })
    local adamw = slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 })
    local losses, norms = {}, {}
    for step = 1, 5 do
      adamw:zero_grad()
      local loss = reference.replicas_loss(ref, all, layout.dp)
      loss:backward()
      losses[step], norms[step] = loss:item(), slapo.clip_grad_norm(ref, 0.5)
      adamw:step()
    end
    assert(norms[1] > 0.5, "the clip acts")
    local sch = slapo.create_schedule(mixtral({ output_router_logits = true }), { group = layout.tp_group })
    local opts = { ep_group = layout.ep_group }
    for k, v in pairs(schedule_opts or {}) do opts[k] = v end
    local fully = opts.fully_shard
    opts.fully_shard = nil
    require("slapo.schedules.mixtral").schedule(sch, opts)
    for name, p in sch.mod:named_parameters() do  -- under TP each expert is split too: 1/tp of its rows
      if name:find("experts%.%d+%.w1%.weight$") then eq(48 / layout.tp, p:size(0), name) end
    end
    if fully then  -- everything but the experts 1/N a rank (FSDP2's order: each layer, then the root)
      for _, layer in ipairs(sch["model.layers"]:children()) do
        if fully == "experts too" then  -- each expert 1/(dp/ep) over the replicas holding it
          for _, expert in ipairs(layer["block_sparse_moe.experts"]:children()) do
            expert:fully_shard({ group = layout.expert_dp_group })
          end
        end
        layer:fully_shard({ group = layout.dp_group })
      end
      sch:fully_shard({ group = layout.dp_group })
      local sliced_experts = 0
      for _, name in ipairs(sch.mod:fully_sharded_parameters()) do
        sliced_experts = sliced_experts + (is_expert(name) and 1 or 0)
      end
      eq(fully == "experts too" and 2 * 3 * 4 / layout.ep or 0, sliced_experts, "the experts fully shard kept as slices")
    end
    local result = slapo.train({ model = sch.mod, layout = layout, steps = 5, lr = 1e-2, clip = 0.5,
      schedule = "constant", quiet = true, optimizer = optimizer, data = function() return mine end })
    reference.check_steps(result, losses, norms)
    local theirs, compared, experts = sch.mod:state_dict(), 0, 0
    local sliced = {}  -- fully_shard's slices (over every rank here), gathered whole
    for _, name in ipairs(sch.mod:fully_sharded_parameters()) do sliced[name] = true end
    local mine, names = ref:state_dict(), {}
    for name in pairs(mine) do names[#names + 1] = name end
    table.sort(names)  -- the gathers in one order on every rank
    for _, name in ipairs(names) do
      local p, held = mine[name], theirs[name]
      if held and sliced[name] then
        held = slapo.dist.all_gather(held:detach(), 0, is_expert(name) and layout.expert_dp_group or layout.dp_group)
      end
      if held and layout.tp > 1 and is_expert(name) then  -- w1, w3 split by rows over TP, w2 by columns
        held = slapo.dist.all_gather(held:detach(), name:find("%.w2%.") and 1 or 0, layout.tp_group)
      end
      if held and table.concat(held:size(), "x") == table.concat(p:size(), "x") then
        close(p, held, { rtol = 1e-4, atol = 5e-5 })
        compared = compared + 1
        experts = experts + (is_expert(name) and 1 or 0)
      end
    end
    assert(experts == 2 * 3 * 4 / (layout.ep > 1 and layout.ep or layout.dp), "this rank's experts compared")
    assert(compared > experts, "the rest compared too")
    return layout
  end

  it("trains under slapo.train over layout{ep = N} as one process does, gradient norm clipped across the ranks",
    function()
    local layout = trains_as_one_process({ ep = world })
    eq(world, layout.ep)
    matches(("ep group {%s}"):format(world == 2 and "0, 1" or "0, 1, 2, 3"), tostring(layout))
  end)

  if world == 4 then
    it("averages each expert over the replicas holding it: ep 2 of 4 data-parallel ranks, checkpointed", function()
      local layout = trains_as_one_process({ ep = 2 }, { checkpoint = 1.0 })
      eq({ rank < 2 and 0 or 2, rank < 2 and 1 or 3 }, layout.ep_ranks)
      eq({ rank % 2, rank % 2 + 2 }, layout.expert_dp_ranks)
    end)
    it("fully shards each expert over the replicas holding it: ep 2 x expert_dp 2, the rest over all 4", function()
      trains_as_one_process({ ep = 2 }, { fully_shard = "experts too" })
    end)
    it("composes with tensor parallelism of attention: tp 2 x ep 2", function()
      local layout = trains_as_one_process({ tp = 2, ep = 2 })
      eq({ rank % 2, rank % 2 + 2 }, layout.ep_ranks, "the replicas of one tensor-parallel rank")
    end)
  else
    it("composes with tensor parallelism of attention (tp 2) and with checkpointing", function()
      trains_as_one_process({ tp = 2 }, { checkpoint = 1.0 })
    end)
  end

  it("shards AdamW's state with zero_adamw: the experts' over the ranks holding them, the rest over every replica",
    function()
    trains_as_one_process({ ep = world }, nil, "zero_adamw")
    if world == 4 then trains_as_one_process({ ep = 2 }, { checkpoint = 1.0 }, "zero_adamw") end
  end)

  it("zero_adamw holds 1/N of the dense state and 1/(dp/ep) of this rank's experts'", function()
    local layout = require("slapo.parallel").layout({ ep = world == 4 and 2 or world })
    local sch = slapo.create_schedule(mixtral(), { group = layout.tp_group })
    require("slapo.schedules.mixtral").schedule(sch, { ep_group = layout.ep_group })
    local dense, experts = 0, 0
    for name, p in sch.mod:named_parameters() do
      if is_expert(name) then experts = experts + p:numel() else dense = dense + p:numel() end
    end
    local expert_dp = layout.dp / layout.ep
    local opt = slapo.optim.zero_adamw(sch.mod, { group = layout.dp_group, expert_group = layout.expert_dp_group })
    eq(math.ceil(dense / layout.dp) + math.ceil(experts / expert_dp), opt:shard_numel())
    -- its checkpoint state names each part; another optimizer's state is refused
    local state = opt:state_tensors()
    assert(state["zero.exp_avg"] and state["zero.experts.exp_avg"] and state["zero.step"])
    local plain = slapo.optim.zero_adamw(mixtral(), { group = layout.dp_group })
    matches("zero_adamw: the optimizer state has no 'zero%.experts%.",
      pcall_err(opt.load_state_tensors, opt, plain:state_tensors()))
    -- the experts' group must be named, and be the ranks holding the same experts
    matches(("optim.zero_adamw: model%%.layers%%.0%%.block_sparse_moe spreads its experts over ranks {%s} "
      .. "%%(shard_experts%%), so each rank holds experts of its own: give expert_group"):format(
      table.concat(layout.ep_ranks, ", ")), pcall_err(slapo.optim.zero_adamw, sch.mod, { group = layout.dp_group }))
    matches("optim.zero_adamw: expert_group {0, 1.*} holds rank %d, which holds other experts",
      pcall_err(slapo.optim.zero_adamw, sch.mod, { group = layout.dp_group, expert_group = slapo.dist.world() }))
  end)

  it("composes with fully_shard of everything but the experts (each layer, then the root)", function()
    trains_as_one_process({ ep = world }, { fully_shard = true })
  end)

  it("saves each rank's experts in training checkpoints and resumes them, on the same layout or another", function()
    local parallel = require("slapo.parallel")
    slapo.manual_seed(4)
    local all = slapo.randint(0, 64, { 2 * world, 8 })
    local dir = "/tmp/slapo-ep-ckpt-" .. os.getenv("MASTER_PORT")  -- one name on every rank
    if rank == 0 then os.execute(("rm -rf %s %s-same %s-other %s-zero %s-zero-same"):format(dir, dir, dir, dir, dir)) end
    slapo.dist.barrier()
    local function run(layout, into, resume, optimizer)
      local sch = slapo.create_schedule(mixtral(), { group = layout.tp_group })
      require("slapo.schedules.mixtral").schedule(sch, { ep_group = layout.ep > 1 and layout.ep_group or nil })
      local mine = all:narrow(0, 2 * layout.dp_rank, 2)
      return slapo.train({ model = sch.mod, layout = layout, steps = 4, lr = 1e-2, clip = 0.5, quiet = true,
        checkpoint_dir = into, checkpoint_every = 2, resume = resume, optimizer = optimizer,
        data = function() return mine end })
    end
    local whole = parallel.layout({ ep = world })
    local full = run(whole, dir, false)
    local same = run(whole, dir .. "-same", dir .. "/step-000002")
    eq(3, same.first_step)
    for step = 3, 4 do eq(full.losses[step], same.losses[step], "step " .. step .. ", resumed on the same layout") end
    -- zero_adamw's slices (the experts' over their replicas) resume on the same layout
    local zero = run(whole, dir .. "-zero", false, "zero_adamw")
    local zero_same = run(whole, dir .. "-zero-same", dir .. "-zero/step-000002", "zero_adamw")
    for step = 3, 4 do eq(zero.losses[step], zero_same.losses[step], "step " .. step .. ", zero_adamw resumed") end
    -- every rank holding every expert (ep 1: plain data parallelism) reads all of them
    local other = run(parallel.layout({ tp = 1 }), dir .. "-other", dir .. "/step-000002")
    for step = 3, 4 do
      assert(math.abs(other.losses[step] - full.losses[step]) < 1e-5 * full.losses[step],
        ("step %d: %.7f resumed with every expert on every rank, %.7f"):format(step, other.losses[step],
          full.losses[step]))
    end
    slapo.dist.barrier()
    if rank == 0 then os.execute(("rm -rf %s %s-same %s-other %s-zero %s-zero-same"):format(dir, dir, dir, dir, dir)) end
  end)

  it("verifies against the unscheduled model: outputs and the gradients of every weight this rank holds", function()
    local layout = require("slapo.parallel").layout({ ep = world })
    local sch = slapo.create_schedule(mixtral(), { group = layout.tp_group })
    local ids = slapo.randint(0, 64, { 2, 8 })
    slapo.dist.broadcast(ids, 0)  -- the same example on every rank, as verify takes it
    local report = slapo.verify(sch, { ids, { labels = ids, output_router_logits = true } }, function(s)
      require("slapo.schedules.mixtral").schedule(s, { ep_group = layout.ep_group })
    end)
    local held = 0
    for _ in pairs(sch.mod:expert_parallel_parameters()) do held = held + 1 end
    eq(2 * 3 * 4 / world, held)
    eq(#sch.mod:parameters(), report.gradients, "every parameter this rank holds, its experts included")
    assert(report.max_grad_diff < 1e-5 and report.max_output_diff < 1e-5)
  end)

  it("saves one Hugging Face checkpoint with every rank's experts (slapo.save of the schedule or its module)", function()
    local layout = require("slapo.parallel").layout({ ep = world })
    local sch = slapo.create_schedule(mixtral(), { group = layout.tp_group })
    require("slapo.schedules.mixtral").schedule(sch, { ep_group = layout.ep_group, checkpoint = 0.5 })
    local ids = slapo.randint(0, 64, { 2, 8 })
    slapo.dist.broadcast(ids, 0)
    for _, target in ipairs({ sch, sch.mod }) do
      local dir = "/tmp/slapo-ep-save-" .. os.getenv("MASTER_PORT")
      slapo.save(target, dir)
      slapo.dist.barrier()
      local back, whole = slapo.models.from_pretrained(dir), mixtral()
      eq(whole:num_params(), back:num_params())
      close(whole(ids), back(ids), { rtol = 0, atol = 0 })
      slapo.dist.barrier()
      if rank == 0 then os.execute("rm -rf " .. dir) end
    end
  end)

  it("refuses an expert group that is not the layout's, and training without a layout", function()
    local _, mine = rows()
    local layout = require("slapo.parallel").layout({ tp = 1 })
    local sch = expert_parallel(mixtral())
    local function train(extra)
      local opts = { model = sch.mod, steps = 1, quiet = true, data = function() return mine end }
      for k, v in pairs(extra) do opts[k] = v end
      return pcall_err(slapo.train, opts)
    end
    local file = ("/tmp/slapo-ep-swap-%s-%d.lua"):format(os.getenv("MASTER_PORT"), rank)
    local f = assert(io.open(file, "w"))
    f:write('return function(sch) for _, layer in ipairs(sch["model.layers"]:children()) do '
      .. 'layer["block_sparse_moe"]:shard_experts() end end\n')
    f:close()
    matches("train: zero_adamw with shard_experts %(model%.layers%.0%.block_sparse_moe%) and a schedule_file",
      pcall_err(slapo.train, { make_model = mixtral, schedule_file = file, layout = layout, optimizer = "zero_adamw",
        steps = 1, quiet = true, data = function() return mine end }))
    os.remove(file)
    matches(("train: model%%.layers%%.0%%.block_sparse_moe spreads its experts over ranks {0, 1%s} %%(shard_experts%%): "
      .. "give layout = slapo%%.parallel%%.layout{ep = %d}"):format(world == 4 and ", 2, 3" or "", world), train({}))
    if world == 4 then
      local tp2 = require("slapo.parallel").layout({ tp = 2 })
      matches("spreads its experts over ranks {0, 1, 2, 3}, which are not inside this rank's data%-parallel ranks",
        train({ layout = tp2 }))
      local ep2 = require("slapo.parallel").layout({ ep = 2 })
      matches("spreads its experts over ranks {0, 1, 2, 3}, but the layout's ep group is", train({ layout = ep2 }))
    end
    matches("parallel.layout: ep = 3 does not divide the", pcall_err(require("slapo.parallel").layout, { ep = 3 }))
    -- a schedule over the world (the default group) on a layout of replicas: refused, naming both
    local over_world = slapo.create_schedule(mixtral())
    over_world["model.layers.0.self_attn.q_proj"]:shard("weight", 0)
    matches(("train: the model's parameters are split by shard over ranks {0, 1%s}, but this rank's tensor%%-parallel "
      .. "group in the layout is {%d}"):format(world == 4 and ", 2, 3" or "", rank),
      pcall_err(slapo.train, { model = over_world.mod, layout = layout, steps = 1, quiet = true,
        data = function() return mine end }))
  end)

  it("drops no token when every token goes to experts on one rank", function()
    local ref, sch = mixtral(), expert_parallel(mixtral())
    -- positive inputs; a gate of ones on the last two experts' rows: every token's top-2 lives on the last rank
    local rows_of_gate = {}
    for e = 0, 3 do
      rows_of_gate[e + 1] = {}
      for i = 1, 32 do rows_of_gate[e + 1][i] = e >= 2 and (e - 1) or 0 end
    end
    local gate = slapo.tensor(rows_of_gate)
    ref.model.layers["0"].block_sparse_moe.gate.weight:detach():copy_(gate)
    sch.mod.model.layers["0"].block_sparse_moe.gate.weight:detach():copy_(gate)
    slapo.manual_seed(6 + rank)
    local x = slapo.rand({ 2, 5, 32 }) + 0.1
    local want = ref.model.layers["0"].block_sparse_moe(x)[1]
    local before = slapo.dist.all_to_all_totals()
    local got = sch.mod.model.layers["0"].block_sparse_moe(x)[1]
    local after = slapo.dist.all_to_all_totals()
    -- 4 exchanges: the row counts (an int64 to each rank), this rank's 10 tokens x 2 slots as rows of
    -- 32 floats and their experts' ids (int64), and the results back for the rows this rank's experts
    -- ran: every rank's 10 tokens for each of experts 2 and 3 it holds
    eq(4, after.calls - before.calls)
    local per, held_of_2_3 = 4 / world, 0
    for e = rank * per, rank * per + per - 1 do held_of_2_3 = held_of_2_3 + (e >= 2 and 1 or 0) end
    eq(world * 8 + 20 * 32 * 4 + 20 * 8 + held_of_2_3 * world * 10 * 32 * 4, after.bytes - before.bytes)
    close(want, got, { rtol = 1e-5, atol = 1e-6 })
    -- backward too: the ranks whose experts got no row take part in both exchanges again
    want:sum():backward()
    got:sum():backward()
    local summed = ref.model.layers["0"].block_sparse_moe.experts["3"].w2.weight.grad:clone()
    slapo.dist.all_reduce(summed)  -- every rank's tokens' gradient for expert 3, which the last rank holds
    if rank == world - 1 then
      close(summed, sch.mod.model.layers["0"].block_sparse_moe.experts["3"].w2.weight.grad * world,
        { rtol = 1e-5, atol = 1e-6 })
    end
  end)

  it("refuses by name what it cannot split, and changes nothing", function()
    local sch = slapo.create_schedule(mixtral())
    matches("shard_experts: 'model.layers.0.mlp' is", pcall_err(function()
      return slapo.create_schedule(slapo.models.mistral({ hidden_size = 32, intermediate_size = 48,
        num_hidden_layers = 1, num_attention_heads = 4, num_key_value_heads = 2, vocab_size = 64 }))
        ["model.layers.0.mlp"]:shard_experts()
    end))
    matches("not a sparse MoE block", pcall_err(function() return sch["model.layers.0.self_attn"]:shard_experts() end))
    local odd = slapo.create_schedule(mixtral({ num_local_experts = 3 * world + 1, num_experts_per_tok = 1 }))
    matches(("has %d experts, which the %d ranks of .* do not divide"):format(3 * world + 1, world),
      pcall_err(function() return odd["model.layers.0.block_sparse_moe"]:shard_experts() end))
    eq(3 * world + 1, #odd["model.layers.0.block_sparse_moe.experts"]:children(), "nothing changed")
    matches("option 'group'", pcall_err(function()
      return sch["model.layers.0.block_sparse_moe"]:shard_experts({ group = 3 }) end))
    sch["model.layers.1.block_sparse_moe"]:shard_experts()
    matches("models.expert_compute: 'model.layers.1.block_sparse_moe' spreads its experts over ranks",
      pcall_err(slapo.models.expert_compute, sch.mod, "dense"))
    eq("top_k=2", sch["model.layers.0.block_sparse_moe"].mod:describe(), "no block turned dense")
    matches("already holds some of its 4 experts only",
      pcall_err(function() return sch["model.layers.1.block_sparse_moe"]:shard_experts() end))
  end)
end)
