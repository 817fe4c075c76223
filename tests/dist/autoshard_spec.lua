-- The planner's intra-op pass (slapo.autoshard) on one layer of each zoo family at a width where
-- tensor parallelism pays on H100s: it must rediscover Megatron's layout (column-parallel q/k/v
-- and first MLP projections, row-parallel output projections), and the schedule it writes must
-- verify on a small model of the same family on 2 ranks.
local world = slapo.dist.world_size()

local families = {
  gpt2 = {
    wide = { n_embd = 4096, n_layer = 1, n_head = 32, vocab_size = 64, n_positions = 16 },
    small = { n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16, resid_pdrop = 0, embd_pdrop = 0,
      attn_pdrop = 0 },
    layers = "transformer.h",
    expect = { ["attn.c_attn"] = "column", ["attn.c_proj"] = "row", ["mlp.c_fc"] = "column", ["mlp.c_proj"] = "row" },
  },
  bert = {
    wide = { hidden_size = 4096, num_hidden_layers = 1, num_attention_heads = 32, intermediate_size = 16384,
      vocab_size = 64, max_position_embeddings = 16 },
    small = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64, vocab_size = 64,
      max_position_embeddings = 16, hidden_dropout_prob = 0, attention_probs_dropout_prob = 0 },
    layers = "bert.encoder.layer",
    expect = { ["attention.self.query"] = "column", ["attention.self.key"] = "column",
      ["attention.self.value"] = "column", ["attention.output.dense"] = "row", ["intermediate.dense"] = "column",
      ["output.dense"] = "row" },
    shared = { "attention.self" },  -- q, k and v's input gradient all-reduced once, on their module
  },
  llama = {
    wide = { hidden_size = 4096, num_hidden_layers = 1, num_attention_heads = 32, num_key_value_heads = 8,
      intermediate_size = 11008, vocab_size = 64 },
    small = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
      intermediate_size = 64, vocab_size = 64 },
    layers = "model.layers",
    expect = { ["self_attn.q_proj"] = "column", ["self_attn.k_proj"] = "column", ["self_attn.v_proj"] = "column",
      ["self_attn.o_proj"] = "row", ["mlp.gate_proj"] = "column", ["mlp.up_proj"] = "column",
      ["mlp.down_proj"] = "row" },
    shared = { "self_attn", "mlp" },
  },
}

describe("slapo.autoshard (intra-op pass, 1-D mesh)", function()
  for _, name in ipairs({ "gpt2", "bert", "llama" }) do
    local f = families[name]
    it(name .. ": finds Megatron's layout on a 4096-wide layer, and its schedule verifies on 2 ranks", function()
      local wide = slapo.models[name](f.wide, { init = false })
      slapo.no_grad(function() wide(slapo.randint(0, 64, { 1, 16 })) end)  -- the layer's inputs, for the trace
      local layer = slapo.create_schedule(wide)[f.layers .. ".0"]
      local plan = slapo.autoshard(layer, { ranks = world, batch = 8, seq = 512 })
      -- the exhaustive search (what a build without CBC runs) agrees with the ILP on the real layer
      local searched = slapo.autoshard(layer, { ranks = world, batch = 8, seq = 512, solver = "exhaustive" })
      wide, layer = nil, nil
      collectgarbage()
      for path, style in pairs(f.expect) do
        eq(style, plan.strategy[path], path)
      end
      eq("exhaustive", searched.solver)
      eq(plan.strategy, searched.strategy)
      assert(math.abs(plan.step_s - searched.step_s) <= 1e-9 * plan.step_s, searched.step_s)
      assert(plan.step_s < plan.replicated_s, "sharded is predicted faster than replicated")
      -- Megatron's f: one input-gradient all-reduce per shared input, on the module that takes it
      for _, parent in ipairs(f.shared or {}) do
        matches('\n  sch%["' .. parent:gsub("%.", "%%.") .. '"%]:sync%("bwd_post", "all_reduce"%)\n', plan.source)
      end
      local syncs = select(2, plan.source:gsub('"bwd_post"', ""))
      eq(2, syncs, "backward all-reduces in the layer")
      slapo.manual_seed(5)
      local sch = slapo.create_schedule(slapo.models[name](f.small))
      local ids = slapo.randint(0, 64, { 2, 8 })
      slapo.dist.broadcast(ids, 0)
      local report = slapo.verify(sch, { ids }, {}, function(s)
        for _, layer in ipairs(s[f.layers]:children()) do
          plan:apply(layer)
        end
      end)
      eq(report.params, report.gradients, "every parameter's gradient compared")
    end)
  end

  it("keeps a narrow layer replicated where the all-reduces cost more than the compute they save", function()
    local small = slapo.models.gpt2(families.gpt2.small)
    small(slapo.randint(0, 64, { 1, 8 }))
    local plan = slapo.autoshard(slapo.create_schedule(small)["transformer.h.0"], { ranks = world })
    eq("replicated", plan.strategy["attn.c_proj"])
    matches("stays replicated", plan.source)
    matches("autoshard: 'transformer.h.0.ln_1' %(LayerNorm%) has no Linear or Conv1D to shard",
      pcall_err(slapo.autoshard, slapo.create_schedule(small)["transformer.h.0.ln_1"], { inputs = { slapo.randn({ 1, 8, 32 }) } }))
    matches("autoshard: unknown option 'rank'", pcall_err(slapo.autoshard, slapo.create_schedule(small)["transformer.h.0"],
      { rank = 2 }))
  end)
end)

describe("slapo.autoshard (the ILP on a 2-D mesh, under a memory budget)", function()
  local function layer_of_width(width)
    local m = slapo.models.gpt2({ n_embd = width, n_layer = 1, n_head = 8, vocab_size = 64, n_positions = 16 },
      { init = false })
    slapo.no_grad(function() m(slapo.randint(0, 64, { 1, 16 })) end)
    return slapo.create_schedule(m)["transformer.h.0"]
  end

  it("shards where the data-parallel axis's gradient all-reduce pays for it, though one node keeps it whole", function()
    local layer = layer_of_width(512)
    -- the same 4096 tokens per tensor-parallel pair: alone on a node, and as one of 16 replicas over 4 nodes
    local alone = slapo.autoshard(layer, { ranks = 2, batch = 8, seq = 512 })
    local mesh = slapo.autoshard(layer, { ranks = 2, dp = 16, batch = 128, seq = 512, cluster = "4x8:h100" })
    eq("replicated", alone.strategy["mlp.c_fc"])
    eq("column", mesh.strategy["mlp.c_fc"])
    eq("row", mesh.strategy["mlp.c_proj"])
    eq("column", mesh.strategy["attn.c_attn"])
    eq(slapo.ilp_solver, mesh.solver)
    matches("%-%- autoshard: 4 projections and %d+ other ops chosen by the", mesh.source)
  end)

  it("shards more and turns ZeRO-1 on to fit a memory budget, and names memory_mib when nothing fits", function()
    local layer = layer_of_width(1024)
    local opts = { ranks = 2, dp = 4, batch = 8, seq = 128 }
    local free = slapo.autoshard(layer, opts)
    eq(false, free.zero)
    -- the budget between the plan's memory and the most sharded plan's
    local smallest = slapo.autoshard(layer, { ranks = 2, dp = 4, batch = 8, seq = 128, zero = true,
      memory_mib = free.memory_mib * 0.75 })
    assert(smallest.memory_mib <= free.memory_mib * 0.75, smallest.memory_mib)
    eq(true, smallest.zero)
    assert(smallest.step_s >= free.step_s, "a budget never makes the plan faster")
    matches("train with ZeRO%-1", smallest.source)
    local forced = slapo.autoshard(layer, { ranks = 2, dp = 4, batch = 8, seq = 128, zero = false })
    eq(false, forced.zero)
    matches("autoshard: 'transformer.h.0' needs at least [%d.]+ MiB per device on 2 x 4 ranks %(tp x dp, ZeRO%-1%); "
      .. "memory_mib is 1$", pcall_err(slapo.autoshard, layer, { ranks = 2, dp = 4, memory_mib = 1 }))
    matches("autoshard: 'transformer.h.0': option 'zero' must be true, false or \"auto\", got \"maybe\"",
      pcall_err(slapo.autoshard, layer, { zero = "maybe" }))
    matches("autoshard: 'transformer.h.0': option 'solver' must be one of \"ilp\", \"exhaustive\", got \"cbc\"",
      pcall_err(slapo.autoshard, layer, { solver = "cbc" }))
  end)

  it("plans a whole GPT-2 in one ILP: the tied LM head stays whole, and the budgeted plan verifies on 2 ranks", function()
    slapo.manual_seed(5)
    -- four layers: 17 projections, past what enumerating 3^n assignments could search
    local config = { n_embd = 64, n_layer = 4, n_head = 4, vocab_size = 64, n_positions = 16, resid_pdrop = 0,
      embd_pdrop = 0, attn_pdrop = 0 }
    local model = slapo.models.gpt2(config)
    local ids = slapo.randint(0, 64, { 2, 8 })
    slapo.dist.broadcast(ids, 0)
    slapo.no_grad(function() model(ids) end)
    local whole = slapo.autoshard(slapo.create_schedule(model), { ranks = world, batch = 2, seq = 8 })
    local projections = 0
    for _ in pairs(whole.strategy) do projections = projections + 1 end
    eq(17, projections)
    eq("replicated", whole.strategy["lm_head"])
    eq("replicated", whole.strategy["transformer.h.1.mlp.c_fc"])  -- too narrow to pay
    -- a budget below the replicated model's memory: the layers must shard
    local budget = whole.replicated_memory_mib * 0.8
    local plan = slapo.autoshard(slapo.create_schedule(model), { ranks = world, batch = 2, seq = 8,
      memory_mib = budget })
    assert(plan.memory_mib <= budget, plan.memory_mib)
    eq("replicated", plan.strategy["lm_head"])
    local sharded = 0
    for _, style in pairs(plan.strategy) do
      if style ~= "replicated" then sharded = sharded + 1 end
    end
    assert(sharded >= 2, "sharded " .. sharded .. " projections")  -- the fewest that fit: each costs time
    local report = slapo.verify(slapo.create_schedule(model), { ids }, {}, function(s) plan:apply(s) end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)
end)

describe("slapo.autoshard (a projection whose output must be whole)", function()
  it("shards LLaMA's untied LM head column-parallel with its logits all-gathered, and it verifies on 2 ranks", function()
    slapo.manual_seed(1)
    local model = slapo.models.llama({ hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 4,
      num_key_value_heads = 2, intermediate_size = 128, vocab_size = 8192 })
    local ids = slapo.randint(0, 8192, { 2, 8 })
    slapo.dist.broadcast(ids, 0)
    model(ids)
    local whole = slapo.autoshard(slapo.create_schedule(model), { ranks = world, batch = 2, seq = 8 })
    eq("replicated", whole.strategy["lm_head"])
    -- the head's 8192 x 64 weight is most of the model: a budget under it shards the head, whose
    -- logits leave the model whole (a row-parallel head would need its input split)
    local plan = slapo.autoshard(slapo.create_schedule(model), { ranks = world, batch = 2, seq = 8,
      memory_mib = whole.replicated_memory_mib * 0.8 })
    eq("column_gather", plan.strategy["lm_head"])
    matches('sch%["lm_head"%]:shard%("weight", 0%):sync%("fwd_post", "all_gather", { axis = %-1 }%)', plan.source)
    local report = slapo.verify(slapo.create_schedule(model), { ids }, {}, function(s) plan:apply(s) end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)
end)

describe("slapo.autoshard (one input-gradient all-reduce for projections that share an input)", function()
  -- q and k read the block's input; with a residual inside the block, the block's input gradient
  -- also has a whole part, so the all-reduce must stay on q and k themselves
  local function model(residual)
    local nn = slapo.nn
    local block = nn.Module({ type = "Block", children = { q = nn.Linear(64, 64), k = nn.Linear(64, 64),
      o = nn.Linear(64, 64) }, forward = function(self, x)
        local y = self.o(self.q(x) * self.k(x))
        return residual and y + x or y
      end })
    return nn.Module({ type = "Root", children = { norm = nn.LayerNorm(64), block = block },
      forward = function(self, x) return self.block(self.norm(x)) end })
  end

  for _, residual in ipairs({ false, true }) do
    it(residual and "keeps a sync on each projection when the module uses the input elsewhere too"
      or "moves the sync to the module whose only use of its input is the column projections", function()
      slapo.manual_seed(3)
      local root = model(residual)
      local x = slapo.randn({ 2, 8, 64 })
      slapo.dist.broadcast(x, 0)
      root(x)
      local whole = slapo.autoshard(slapo.create_schedule(root), { ranks = world, batch = 2, seq = 8 })
      -- a budget the replicated block misses: q, k column- and o row-parallel
      local plan = slapo.autoshard(slapo.create_schedule(root), { ranks = world, batch = 2, seq = 8,
        memory_mib = whole.replicated_memory_mib * 0.8 })
      -- column-parallel, with or without its output gathered: either way q and k need their input's
      -- gradient all-reduced
      matches("^column", plan.strategy["block.q"])
      matches("^column", plan.strategy["block.k"])
      local syncs = select(2, plan.source:gsub('"bwd_post"', ""))
      eq(residual and 2 or 1, syncs, plan.source)
      if not residual then
        matches('sch%["block"%]:sync%("bwd_post", "all_reduce"%)', plan.source)
      end
      local report = slapo.verify(slapo.create_schedule(root), { x }, {}, function(s) plan:apply(s) end)
      eq(report.params, report.gradients, "every parameter's gradient compared")
    end)
  end
end)
