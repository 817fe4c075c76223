-- A mixture of experts pipelined, its experts spread over each stage's replicas: pp 2 x dp (world /
-- 2), ep 2. On 4 ranks no other rank holds a rank's experts; on 8 each expert has 2 replicas
-- (expert_dp_group), averaged in buckets of their own. Each micro-batch adds its routing's
-- load-balancing loss, which needs every layer's router logits at the last stage.
local world, rank = slapo.dist.world_size(), slapo.dist.rank()
local parallel = require("slapo.parallel")

local function mixtral()
  slapo.manual_seed(3)
  return slapo.models.mixtral({ hidden_size = 32, intermediate_size = 48, num_hidden_layers = 2,
    num_attention_heads = 4, num_key_value_heads = 2, num_local_experts = 4, num_experts_per_tok = 2, vocab_size = 64,
    max_position_embeddings = 16, output_router_logits = true, router_aux_loss_coef = 0.5 })
end

-- One process's loss on every replica's micro-batches (2 rows each), each with its routing's loss:
-- the mean over them, as the pipelines' replicas together compute it.
local function replicas_loss(ref, all, replicas)
  local expected, pieces = nil, 2 * replicas
  for piece = 0, pieces - 1 do
    local rows = all:narrow(0, 2 * piece, 2)
    local loss = ref(rows, { labels = rows }) / pieces
    expected = expected and expected + loss or loss
  end
  return expected
end

local function is_expert(name) return name:find("%.experts%.") ~= nil end

describe("experts inside pipeline stages", function()
  it("train as one process on every replica's micro-batches: pp 2, ep 2, 3 AdamW steps", function()
    if world ~= 4 and world ~= 8 then skip(("needs 4 or 8 ranks (pp 2 x ep 2), this run has %d"):format(world)) end
    local layout = parallel.layout({ pp = 2, ep = 2 })
    local sch = slapo.create_schedule(mixtral(), { group = layout.tp_group })
    for _, layer in ipairs(sch["model.layers"]:children()) do
      layer["block_sparse_moe"]:shard_experts({ group = layout.ep_group })
    end
    parallel.cut_evenly(sch, "model.layers", 2)
    local options = { group = layout.pp_group, dp_group = layout.dp_group, micro_batches = 2 }
    matches("build: model%.layers%.0%.block_sparse_moe spreads its experts over ranks {%d, %d} %(shard_experts%), "
      .. "each rank's own, which pipeline%.dp_group's buckets must leave out", pcall_err(slapo.build, sch,
        { pipeline = options }))
    options.expert_dp_group = layout.expert_dp_group
    local pipe = slapo.build(sch, { pipeline = options })
    slapo.manual_seed(4)
    local all = slapo.randint(0, 64, { 4 * layout.dp, 8 })  -- 4 rows a replica, 2 a micro-batch
    local mine = all:narrow(0, 4 * layout.dp_rank, 4)
    pipe:prepare(mine)
    local ref = mixtral()
    local opts = { slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 }),
      slapo.optim.adamw(pipe:parameters(), { lr = 1e-2, weight_decay = 0 }) }
    for step = 1, 3 do
      opts[1]:zero_grad()
      opts[2]:zero_grad()
      local expected = replicas_loss(ref, all, layout.dp)
      expected:backward()
      local loss = slapo.tensor({ pipe:step(mine, { labels = mine }) }, { dtype = "float64" })
      slapo.dist.all_reduce(loss, layout.dp_group)
      local got = loss:item() / layout.dp
      assert(math.abs(got - expected:item()) < 1e-5 * expected:item(),
        ("step %d: loss %.7f on 1 process, %.7f pipelined"):format(step, expected:item(), got))
      local theirs, experts = {}, 0
      for name, p in ref:named_parameters() do theirs[name] = p end
      for name, p in pipe:named_parameters() do
        close(theirs[name].grad, p.grad, { rtol = 1e-4, atol = 1e-5 })
        experts = experts + (is_expert(name) and 1 or 0)
      end
      eq(3 * 4 / 2, experts, "this stage's layer: 2 of its 4 experts, 3 weights each")
      opts[1]:step()
      opts[2]:step()
    end
    if rank == 0 then
      print(("    (dp %d, ep %d, expert_dp %d)"):format(layout.dp, layout.ep, layout.dp / layout.ep))
    end
  end)

  -- slapo.train's clipping adds up the norm over the stages, each expert counted once by the ranks
  -- holding it; the layout's expert replicas checked against the pipeline's
  it("train by slapo.train as one process, clipped by the whole model's norm: pp 2, ep 2, 3 steps", function()
    if world ~= 4 and world ~= 8 then skip(("needs 4 or 8 ranks (pp 2 x ep 2), this run has %d"):format(world)) end
    local layout = parallel.layout({ pp = 2, ep = 2 })
    local function pipeline(expert_dp_group)
      local sch = slapo.create_schedule(mixtral(), { group = layout.tp_group })
      for _, layer in ipairs(sch["model.layers"]:children()) do
        layer["block_sparse_moe"]:shard_experts({ group = layout.ep_group })
      end
      parallel.cut_evenly(sch, "model.layers", 2)
      return slapo.build(sch, { pipeline = { group = layout.pp_group, dp_group = layout.dp_group, micro_batches = 2,
        expert_dp_group = expert_dp_group } })
    end
    slapo.manual_seed(4)
    local all = slapo.randint(0, 64, { 4 * layout.dp, 8 })
    local mine = all:narrow(0, 4 * layout.dp_rank, 4)
    local function train(pipe)
      return slapo.train({ model = pipe, layout = layout, data = function() return mine end, steps = 3, lr = 1e-2,
        schedule = "constant", clip = 0.05, quiet = true })
    end
    if layout.dp / layout.ep > 1 then  -- each expert on 2 ranks: told that none holds another's copy
      matches("the pipeline averages its experts over none, but in the layout the replicas holding this rank's "
        .. "experts are {%d, %d}", pcall_err(train, pipeline(false)))
    end
    local pipe = pipeline(layout.dp / layout.ep > 1 and layout.expert_dp_group or false)
    local result = train(pipe)
    local ref = mixtral()
    local adamw = slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 })
    for step = 1, 3 do
      adamw:zero_grad()
      local expected = replicas_loss(ref, all, layout.dp)
      expected:backward()
      local norm = slapo.clip_grad_norm(ref, 0.05)
      assert(norm > 0.05, "the clip acts")
      assert(math.abs(result.losses[step] - expected:item()) < 1e-5 * expected:item(),
        ("step %d: loss %.7f on 1 process, %.7f trained"):format(step, expected:item(), result.losses[step]))
      assert(math.abs(result.grad_norms[step] - norm) < 1e-5 * norm,
        ("step %d: grad norm %.7f on 1 process, %.7f trained"):format(step, norm, result.grad_norms[step]))
      adamw:step()
    end
    local theirs = {}
    for name, p in ref:named_parameters() do theirs[name] = p end
    for name, p in pipe:named_parameters() do close(theirs[name], p, { rtol = 1e-4, atol = 5e-5 }) end
  end)
end)
