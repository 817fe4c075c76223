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
      local expected = nil  -- the mean of the replicas' losses, in data parallelism's order
      for r = 0, world - 1 do
        local part = all:narrow(0, 2 * r, 2)
        local loss = ref(part, { labels = part, output_router_logits = true })
        expected = expected and expected + loss or loss
      end
      expected = expected / world
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

  it("trains under slapo.train with a data-parallel layout as one process does, and refuses what it does not do yet",
    function()
    local all, mine = rows()
    local ref = mixtral()
    local adamw = slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 })
    local expected = {}
    for step = 1, 3 do
      adamw:zero_grad()
      local loss = reference.replicas_loss(ref, all, world)
      loss:backward()
      expected[step] = loss:item()
      adamw:step()
    end
    local layout = require("slapo.parallel").layout({ tp = 1 })
    local sch = expert_parallel(mixtral())
    local result = slapo.train({ model = sch.mod, layout = layout, steps = 3, lr = 1e-2, schedule = "constant",
      quiet = true, data = function() return mine end })
    for step = 1, 3 do
      assert(math.abs(result.losses[step] - expected[step]) < 1e-5 * expected[step],
        ("step %d: %.7f, one process %.7f"):format(step, result.losses[step], expected[step]))
    end
    matches("train: clip with shard_experts: each rank holds other experts %(model%.layers%.0%.block_sparse_moe%.experts%.",
      pcall_err(slapo.train, { model = sch.mod, layout = layout, steps = 1, clip = 1.0, quiet = true,
        data = function() return mine end }))
    matches("train: zero_adamw with shard_experts", pcall_err(slapo.train, { model = sch.mod, layout = layout,
      steps = 1, optimizer = "zero_adamw", quiet = true, data = function() return mine end }))
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
    local got = sch.mod.model.layers["0"].block_sparse_moe(x)[1]
    close(want, got, { rtol = 1e-5, atol = 1e-6 })
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
    matches("fully_shard: 'model.layers.1' holds 'block_sparse_moe', whose experts shard_experts spread over",
      pcall_err(function() return sch["model.layers.1"]:fully_shard() end))
    matches("already holds some of its 4 experts only",
      pcall_err(function() return sch["model.layers.1.block_sparse_moe"]:shard_experts() end))
  end)
end)
