-- slapo.verify on one rank: a failed check (or a failing fn) rolls back what fn applied, in
-- place, so the schedule, its log, the model and the handles a script holds are as before.
local function tiny_gpt2()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32, n_positions = 8 })
end

-- An MLP that drops its activation: runs, but computes something else than GPT2MLP.
local function linear_mlp(mlp)
  return slapo.nn.Module({
    type = "LinearMLP",
    children = { c_fc = mlp.c_fc, c_proj = mlp.c_proj },
    forward = function(self, x)
      return self.c_proj(self.c_fc(x))
    end,
  })
end

local function state(sch, model, ids)
  return { tree = tostring(sch), log = sch:log(), args = #sch:log_args(), out = model(ids) }
end

describe("verify", function()
  it("rolls back fn's primitives when the outputs differ, and says so", function()
    local model = tiny_gpt2():eval()
    local sch = slapo.create_schedule(model)
    sch["transformer.h.1.attn"]:checkpoint()  -- applied before verify: stays
    local ids = slapo.randint(0, 32, { 1, 5 })
    local mlp = sch["transformer.h.0.mlp"]  -- a handle taken before verify
    local before = state(sch, model, ids)
    local err = pcall_err(slapo.verify, sch, { ids }, {}, function(s)
      s["transformer.h.0.attn"]:checkpoint()
      s["transformer.h.0.mlp"]:replace(linear_mlp(s["transformer.h.0.mlp"].mod))
      s["transformer.h.0.mlp.c_fc"]:annotate("weight", "tag", 1)
    end)
    matches("differ", err)
    matches("rolled back the 3 primitives fn applied", err)
    local after = state(sch, model, ids)
    eq(before.tree, after.tree)
    eq(before.log, after.log)
    eq(before.args, after.args)
    close(before.out, after.out)
    -- the old handle names the module in the model again, and primitives apply through it
    eq("GPT2MLP", mlp.mod:type())
    eq(sch["transformer.h.0.mlp"], mlp)
    mlp:checkpoint()
    matches('sch%["transformer%.h%.0%.mlp"%]:checkpoint%(%)', sch:log())
  end)

  it("rolls back when fn itself raises, keeping fn's message", function()
    local model = tiny_gpt2():eval()
    local sch = slapo.create_schedule(model)
    local ids = slapo.randint(0, 32, { 1, 5 })
    local before = state(sch, model, ids)
    local err = pcall_err(slapo.verify, sch, { ids }, {}, function(s)
      s["transformer.h.0.mlp.c_fc"]:shard("weight", 1)
      error("fn gave up half-way", 0)
    end)
    matches("^fn gave up half%-way\nverify: rolled back the 1 primitive fn applied", err)
    local after = state(sch, model, ids)
    eq(before.tree, after.tree)
    eq(before.log, after.log)
  end)

  it("keeps fn's primitives when the check passes", function()
    local model = tiny_gpt2():eval()
    local sch = slapo.create_schedule(model)
    local ids = slapo.randint(0, 32, { 1, 5 })
    local report = slapo.verify(sch, { ids }, {}, function(s)
      s["transformer.h.0.mlp"]:checkpoint()
      s["transformer.h.0.mlp.c_fc"]:shard("weight", 1)
    end)
    eq(report.params, report.gradients)
    matches("checkpoint", sch:log())
    matches("shard", sch:log())
  end)
end)

-- A subgraph rewrite changes the traced graph itself: a roll back puts the graph back as it was,
-- and the leaves a wrapper took back in their places.
describe("verify rolls back a subgraph rewrite", function()
  local function traced_block(x)
    slapo.manual_seed(21)
    local m = slapo.nn.Module({ type = "Block", children = { fc = slapo.nn.Linear(4, 4), act = slapo.nn.ReLU() },
      forward = function(self, t) return self.act(self.fc(t)) * 2 end })
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { x }, leaves = { "Linear", "ReLU" } })
    return m, sch
  end

  it("restores the graph, the leaves' places and the outputs after a checkpoint of a subgraph", function()
    local x = slapo.randn({ 2, 4 })
    local m, sch = traced_block(x)
    local graph_before, out_before, tree_before = tostring(sch:graph()), m(x), tostring(sch)
    local err = pcall_err(slapo.verify, sch, { x }, {}, function(s)
      s:checkpoint(s:find(function(t) return slapo.pattern.call_module("act", slapo.pattern.call_module("fc", t)) end)[1])
      s["CheckPointWrapper_0.act"]:replace(slapo.nn.Identity())  -- computes something else
    end)
    matches("rolled back the 2 primitives fn applied", err)
    eq(graph_before, tostring(sch:graph()), "the traced graph as before the checkpoint")
    eq(tree_before, tostring(sch))
    eq("Linear", sch["fc"].mod:type())
    eq("ReLU", sch["act"].mod:type())
    close(out_before, m(x))
    sch:checkpoint(sch:find(function(t) return slapo.pattern.call_module("act", slapo.pattern.call_module("fc", t)) end)[1])
    close(out_before, m(x), "the same rewrite applies again")
  end)

  it("restores the graph after a replace of a subgraph", function()
    local x = slapo.randn({ 2, 4 })
    local m, sch = traced_block(x)
    local graph_before, out_before = tostring(sch:graph()), m(x)
    local err = pcall_err(slapo.verify, sch, { x }, {}, function(s)
      s:replace(function(t) return t * 3 end, s:find(function(t) return t * 2 end)[1], { check = false })
    end)
    matches("differ.*rolled back the 1 primitive fn applied", err)
    eq(graph_before, tostring(sch:graph()))
    close(out_before, m(x))
  end)
end)
