-- The subgraph primitives (after Slapo's test_subgraph.py, test_fusion.py and the subgraph cases
-- of test_replace.py and test_checkpoint.py): replace, checkpoint and fuse a chosen part of a
-- traced module; outputs and gradients stay equal, new children are reachable by name.
local cfg = { hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 64,
  vocab_size = 64, max_position_embeddings = 16, hidden_dropout_prob = 0, attention_probs_dropout_prob = 0 }

local function bert()
  slapo.manual_seed(3)
  return slapo.models.bert(cfg)
end

local function ids()
  slapo.manual_seed(4)
  return slapo.randint(0, 64, { 2, 8 })
end

local hidden = { 2, 8, 32 }
local attention = "bert.encoder.layer.0.attention.self"

-- The attention core of a traced BertSelfAttention: from k's transpose to probs @ v.
local function attention_core(sub)
  local nodes, inside = {}, false
  local list = sub:graph().nodes
  for i, n in ipairs(list) do
    if n.op == "aten::transpose" and list[i + 1] and list[i + 1].op == "aten::matmul" then
      inside = true
    end
    if inside then
      table.insert(nodes, n)
    end
    if inside and n.op == "aten::matmul" and #nodes > 2 then
      break
    end
  end
  return nodes
end

local function ops(subgraph)
  local t = {}
  for _, n in ipairs(subgraph) do
    table.insert(t, n.op .. (n.target and ("(" .. n.target .. ")") or ""))
  end
  return table.concat(t, " ")
end

describe("find with slapo.pattern.call_module", function()
  it("finds q/k/v + view + transpose as 3 subgraphs, in graph order", function()
    local sub = slapo.create_schedule(bert())[attention]
    sub:trace({ inputs = { slapo.randn(hidden) } })  -- query, key, value stay calls
    local found = sub:find(function(x)
      return slapo.pattern.call_module("query|key|value", x):view({ 2, 8, -1, 16 }):transpose(1, 2)
    end)
    eq(3, #found)
    eq("slapo::call_module(query) aten::view aten::transpose", ops(found[1]))
    eq("slapo::call_module(key) aten::view aten::transpose", ops(found[2]))
    eq("slapo::call_module(value) aten::view aten::transpose", ops(found[3]))
    -- the regex picks the leaves; constants (the view's sizes) must be the trace's
    eq(1, #sub:find(function(x) return slapo.pattern.call_module("^key$", x):view({ 2, 8, -1, 16 }):transpose(1, 2) end))
    eq(0, #sub:find(function(x) return slapo.pattern.call_module("query", x):view({ 2, 8, 2, 16 }):transpose(1, 2) end))
    matches("pattern.call_module: '%(' is not a valid regular expression", pcall_err(sub.find, sub, function(x)
      return slapo.pattern.call_module("(", x)
    end))
  end)

  it("matches a diamond and leaves out the unrelated branch", function()
    local m = slapo.nn.Module({ type = "Diamond", children = { fc = slapo.nn.Linear(8, 8) },
      forward = function(self, x)
        local h = self.fc(x)
        local unrelated = slapo.F.tanh(x)
        return slapo.F.relu(h) + slapo.F.sigmoid(h) + unrelated
      end })
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { slapo.randn({ 4, 8 }) } })
    local found = sch:find(function(h) return slapo.F.relu(h) + slapo.F.sigmoid(h) end)
    eq(1, #found)
    eq("aten::relu aten::sigmoid aten::add", ops(found[1]))
    local with_call = sch:find(function(x)
      local h = slapo.pattern.call_module("fc", x)
      return slapo.F.relu(h) + slapo.F.sigmoid(h)
    end)
    eq("slapo::call_module(fc) aten::relu aten::sigmoid aten::add", ops(with_call[1]))
  end)
end)

describe("fuse(nil, {compiler = \"kernels\"}) on attention scores", function()
  it("puts scale + padding mask + softmax in the masked-softmax kernel; verify passes", function()
    local mask = slapo.cat({ slapo.ones({ 2, 6 }), slapo.zeros({ 2, 2 }) }, 1)  -- 2 padding tokens
    local report = slapo.verify(slapo.create_schedule(bert()), { ids(), { attention_mask = mask } }, {}, function(sch)
      local sub = sch[attention]
      sub:trace({ inputs = { slapo.randn(hidden), slapo.zeros({ 2, 1, 8, 8 }) }, flatten = true })  -- the model's mask shape
      eq(1, sub:fuse(nil, { compiler = "kernels" }))
      local found = false
      for _, n in ipairs(sub:graph().nodes) do
        found = found or n.op == "slapo::masked_softmax"
      end
      assert(found, "the graph calls slapo::masked_softmax")
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)
end)

describe("fuse(subgraph)", function()
  it("fuses a found bias + GELU into BiasGeLU_0, reachable by name, outputs and gradients kept", function()
    local report = slapo.verify(slapo.create_schedule(bert()), { ids() }, {}, function(sch)
      local mlp = sch["bert.encoder.layer.0.intermediate"]
      mlp["dense"]:decompose()
      mlp:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
      local found = mlp:find(function(x, b) return slapo.F.gelu(x + b) end)
      eq(1, #found)
      eq({ "aten::add", "aten::gelu" }, { found[1][1].op, found[1][2].op })
      local fused = mlp:fuse(found[1], { compiler = "kernels", name = "BiasGeLU" })
      eq("bert.encoder.layer.0.intermediate.BiasGeLU_0", fused.path)
      eq("BiasGeLU", sch["bert.encoder.layer.0.intermediate.BiasGeLU_0"].mod:type())
      matches("call_module%(BiasGeLU_0%)", table.concat((function()
        local t = {}
        for _, n in ipairs(mlp:graph().nodes) do
          table.insert(t, n.op .. "(" .. (n.target or "") .. ")")
        end
        return t
      end)(), " "))
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)

  it("hands a subgraph to LibTorch's optimiser with compiler = \"torchscript\"", function()
    local report = slapo.verify(slapo.create_schedule(bert()), { ids() }, {}, function(sch)
      local sub = sch[attention]
      sub:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
      local fused = sub:fuse(attention_core(sub), { compiler = "torchscript", name = "AttentionCore" })
      eq("AttentionCore_0", fused.name)
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
    local sub = slapo.create_schedule(bert())[attention]
    sub:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
    eq("fuse: unknown compiler 'xla' for 'bert.encoder.layer.0.attention.self' (choices: kernels, torchscript, none)",
      pcall_err(sub.fuse, sub, attention_core(sub), { compiler = "xla" }))
  end)

  it("names a subgraph without a kernel pattern and changes nothing", function()
    local sch = slapo.create_schedule(bert())
    local sub = sch[attention]
    sub:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
    local before = tostring(sub:graph())
    local core = attention_core(sub)
    matches("fuse: no kernel pattern in the chosen subgraph", pcall_err(sub.fuse, sub, core))
    eq(before, tostring(sub:graph()))
    eq(0, #sub:children() - 4)  -- query, key, value, dropout
  end)
end)

describe("replace(fn, subgraph)", function()
  it("catches a replacement whose arguments are in another order than the subgraph's inputs", function()
    local sch = slapo.create_schedule(bert())
    local sub = sch[attention]
    sub:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
    local core = attention_core(sub)
    local before = tostring(sub:graph())
    -- the core reads k first (its transpose), then q, then v
    local err = pcall_err(sub.replace, sub, function(q, k, v) return slapo.kernels.attention(q, k, v) end, core)
    matches("matches it only with its arguments in another order", err)
    matches("reorder its parameters", err)
    eq(before, tostring(sub:graph()))
  end)

  it("checks the replacement in eval mode, so attention dropout in a training model does not fail it", function()
    local with_dropout = {}
    for k, v in pairs(cfg) do with_dropout[k] = v end
    with_dropout.attention_probs_dropout_prob = 0.5
    slapo.manual_seed(3)
    local sch = slapo.create_schedule(slapo.models.bert(with_dropout))  -- in training mode
    local sub = sch[attention]
    sub:trace({ inputs = { slapo.randn(hidden) } })  -- the Dropout stays a call inside the core
    sub:replace(function(k, q, v) return slapo.kernels.attention(q, k, v) end, attention_core(sub))
    eq(true, sub.mod:is_training(), "the modes are restored")
    eq(true, sch[attention .. ".dropout"].mod:is_training())
  end)

  it("puts the fused attention kernel in place of the core; verify passes", function()
    local report = slapo.verify(slapo.create_schedule(bert()), { ids() }, {}, function(sch)
      local sub = sch[attention]
      sub:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
      local new = sub:replace(function(k, q, v) return slapo.kernels.attention(q, k, v) end, attention_core(sub))
      eq(attention .. ".Function_0", new.path)
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)

  it("replaces the q, k and v projections together (horizontal) with one fused projection", function()
    -- outputs only: the fused projection has parameters of its own, the old ones get no gradient
    local report = slapo.verify(slapo.create_schedule(bert()), { ids() }, { backward = false }, function(sch)
      local sub = sch[attention]
      sub:trace({ inputs = { slapo.randn(hidden) } })  -- query, key, value stay calls
      local found = sub:find("query|key|value")
      eq(3, #found)
      local w = slapo.cat({ sub.mod.query.weight, sub.mod.key.weight, sub.mod.value.weight }, 0):detach()
      local b = slapo.cat({ sub.mod.query.bias, sub.mod.key.bias, sub.mod.value.bias }, 0):detach()
      local qkv = slapo.nn.Linear(32, 96)
      qkv.weight:detach():copy_(w)
      qkv.bias:detach():copy_(b)
      local fused = slapo.nn.Module({ type = "FusedQKV", children = { qkv = qkv }, forward = function(self, x)
        local out = self.qkv(x)
        return { out:narrow(2, 0, 32), out:narrow(2, 32, 32), out:narrow(2, 64, 32) }
      end })
      local new = sub:replace(fused, found)
      eq("FusedQKV_0", new.name)
    end)
    assert(report.outputs == 1)
  end)
end)

describe("replace(module, subgraph) options and leaves", function()
  -- a traced self-attention whose query, key and value stay leaf calls, and one module to take
  -- their place
  local function traced()
    local sch = slapo.create_schedule(bert())
    local sub = sch[attention]
    sub:trace({ inputs = { slapo.randn(hidden) } })
    local fused = slapo.nn.Module({ type = "FusedQKV", children = { qkv = slapo.nn.Linear(32, 96) },
      forward = function(self, x)
        local out = self.qkv(x)
        return { out:narrow(2, 0, 32), out:narrow(2, 32, 32), out:narrow(2, 64, 32) }
      end })
    return sub, fused
  end

  it("names the new child with {name = ...} and refuses unknown options", function()
    local sub, fused = traced()
    matches("replace: unknown option 'nmae' %(valid: check, name%)",
      pcall_err(sub.replace, sub, fused, sub:find("query|key|value"), { check = false, nmae = "qkv" }))
    local new = sub:replace(fused, sub:find("query|key|value"), { check = false, name = "qkv_fused" })
    eq("qkv_fused_0", new.name)
  end)

  it("refuses to swallow a leaf with a sync (it would be dropped) and leaves the graph as it was", function()
    local sub, fused = traced()
    local ran = 0
    sub["key"]:sync("fwd_pre", function(x) ran = ran + 1; return x end)
    local before = tostring(sub:graph())
    local err = pcall_err(sub.replace, sub, fused, sub:find("query|key|value"), { check = false })
    matches("replace: the subgraph of '.-attention.self' calls 'key', which has 1 sync%(s%) or hook%(s%)", err)
    eq(before, tostring(sub:graph()))
    sub.mod(slapo.randn(hidden))
    eq(1, ran, "the sync still runs")
  end)
end)

describe("the log of subgraph primitives", function()
  it("names the nodes and replays on a fresh model", function()
    local function schedule(sch)
      local mlp = sch["bert.encoder.layer.0.intermediate"]
      mlp["dense"]:decompose()
      mlp:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
      mlp:fuse(mlp:find(function(x, b) return slapo.F.gelu(x + b) end)[1], { name = "BiasGeLU" })
    end
    local first = slapo.create_schedule(bert())
    schedule(first)
    matches(':fuse%({"%%%d+", "%%%d+"}, {name = "BiasGeLU"}%)', first:log())
    local model = bert()
    local replayed = slapo.create_schedule(model)
    load(first:log())()(replayed, first:log_args())
    eq("BiasGeLU", replayed["bert.encoder.layer.0.intermediate.BiasGeLU_0"].mod:type())
    local x = ids()
    close(first.mod(x), model(x))
  end)
end)

describe("checkpoint(subgraph)", function()
  it("moves the subgraph into CheckPointWrapper_0, recomputed in backward with equal gradients", function()
    local report = slapo.verify(slapo.create_schedule(bert()), { ids() }, {}, function(sch)
      local sub = sch[attention]
      sub:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
      local wrapper = sub:checkpoint(attention_core(sub))
      eq("CheckPointWrapper_0", wrapper.name)
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)

  it("refuses names that are not nodes of the graph", function()
    local sch = slapo.create_schedule(bert())
    local sub = sch[attention]
    sub:trace({ inputs = { slapo.randn(hidden) } })
    matches("checkpoint: no node %%nope in the graph of 'bert.encoder.layer.0.attention.self'",
      pcall_err(sub.checkpoint, sub, { { name = "%nope" } }))
    matches("replace: 'bert.encoder.layer.0.attention' is not traced",
      pcall_err(sch["bert.encoder.layer.0.attention"].replace, sch["bert.encoder.layer.0.attention"],
        slapo.nn.Identity(), { { name = "%1" } }))
  end)
end)

describe("replace(fn, subgraph) of a single node", function()
  it("works where the chosen node is the only one (a + b inside (a + b) - a)", function()
    local m = slapo.nn.Module({ type = "AB", forward = function(self, a, b) return (a + b) - a end })
    local sch = slapo.create_schedule(m)
    local a, b = slapo.randn({ 2, 4 }), slapo.randn({ 2, 4 })
    local expected = m(a, b)
    sch:trace({ inputs = { a, b } })
    local found = sch:find(function(x, y) return x + y end)
    eq(1, #found)
    local new = sch:replace(function(x, y) return x + y end, found[1])
    eq("Function_0", new.name)
    close(expected, m(a, b))
  end)
end)

describe("subgraphs that read a leaf call", function()
  local function leafy()
    slapo.manual_seed(11)
    return slapo.nn.Module({ type = "M", children = { fc = slapo.nn.Linear(4, 4) },
      forward = function(self, x) return slapo.F.relu(self.fc(x)) * 2 end })
  end

  it("replace a node fed by a leaf's output (the leaf's shape is recorded in the trace)", function()
    local m = leafy()
    local x = slapo.randn({ 2, 4 })
    local expected = m(x)
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { x } })
    local found = sch:find(function(t) return slapo.F.relu(t) end)
    eq(1, #found)
    sch:replace(function(t) return slapo.F.relu(t) end, found[1])
    close(expected, m(x))
  end)
end)

-- Slapo's test_checkpoint_function and test_fallback_fusion: the wrapper holds the leaves its
-- graph calls (CheckPointWrapper_0.layer1), so primitives reach them there.
describe("checkpoint and fuse own the leaves they wrap", function()
  local function nested()
    slapo.manual_seed(13)
    local block = slapo.nn.Module({ type = "Block", children = { fc = slapo.nn.Linear(4, 4), act = slapo.nn.ReLU() },
      forward = function(self, x) return self.act(self.fc(x)) end })
    return slapo.nn.Module({ type = "M", children = { block = block, out = slapo.nn.Linear(4, 4) },
      forward = function(self, x) return self.out(self.block(x)) * 2 end })
  end
  local function param_names(m)
    local names = {}
    for name in m:named_parameters() do
      table.insert(names, name)
    end
    return table.concat(names, ",")
  end
  local function relu_of_fc(sch)
    local found = sch:find(function(t)
      return slapo.pattern.call_module("block.act", slapo.pattern.call_module("block.fc", t))
    end)
    eq(1, #found)
    return found[1]
  end
  -- nested() traced flat on x with its layers kept as calls; also its output before
  local function traced(x)
    local m = nested()
    local expected = m(x)
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { x }, flatten = true, leaves = { "Linear", "ReLU" } })
    return m, sch, expected
  end
  local function checkpointed(x)
    local m, sch = traced(x)
    sch:checkpoint(relu_of_fc(sch))
    return m, sch
  end

  it("moves each called leaf under the wrapper at its old path, the graph calling it there", function()
    local x = slapo.randn({ 2, 4 })
    local m, sch, expected = traced(x)
    local wrapper = sch:checkpoint(relu_of_fc(sch))
    eq("CheckPointWrapper_0", wrapper.name)
    eq("Linear", sch["CheckPointWrapper_0.block.fc"].mod:type())
    eq("ReLU", sch["CheckPointWrapper_0.block.act"].mod:type())
    eq("Module", sch["CheckPointWrapper_0.block"].mod:type(), "a holder along the leaf's old path")
    eq("Block", sch["block"].mod:type(), "the block itself stays, without the leaves")
    matches("no module 'fc' under 'block'", pcall_err(function() return sch["block.fc"] end))
    local calls = {}
    for _, n in ipairs(wrapper:graph().nodes) do
      if n.op == "slapo::call_module" then
        table.insert(calls, n.target)
      end
    end
    eq("block.fc,block.act", table.concat(calls, ","), "the wrapper's graph calls the leaves it holds")
    close(expected, m(x))
    eq("out.weight,out.bias,CheckPointWrapper_0.block.fc.weight,CheckPointWrapper_0.block.fc.bias", param_names(m))
  end)

  it("reaches the moved leaves with later primitives: a replace inside the wrapper is what its graph runs", function()
    local x = slapo.randn({ 2, 4 })
    local m, sch = checkpointed(x)
    sch["CheckPointWrapper_0.block.act"]:replace(slapo.nn.Identity())
    local plain = nested()
    close(plain.out(plain.block.fc(x)) * 2, m(x))
  end)

  it("verifies against the unscheduled model, every gradient matched by its old name", function()
    local x = slapo.randn({ 2, 4 })
    local report = slapo.verify(slapo.create_schedule(nested()), { x }, {}, function(sch)
      sch:trace({ inputs = { x }, flatten = true, leaves = { "Linear", "ReLU" } })
      sch:checkpoint(relu_of_fc(sch))
    end)
    eq(4, report.params)
    eq(4, report.gradients, "every parameter's gradient compared")
  end)

  it("shows what was applied to a leaf before the move under its new path", function()
    local x = slapo.randn({ 2, 4 })
    local sch = slapo.create_schedule(nested())
    sch["block.fc"]:annotate("weight", "tag", 1)
    sch:trace({ inputs = { x }, flatten = true, leaves = { "Linear", "ReLU" } })
    sch:checkpoint(relu_of_fc(sch))
    matches("%(CheckPointWrapper_0%.block%.fc%) Linear[^\n]*annotate%(\"weight\", \"tag\", 1%) from block%.fc",
      tostring(sch))
    matches('sch%["block.fc"%]:annotate', sch:log(), "the log replays as recorded")
  end)

  it("keeps a leaf the rest of the graph also calls where it is (a ReLU used twice)", function()
    slapo.manual_seed(14)
    local m = slapo.nn.Module({ type = "Twice", children = { fc = slapo.nn.Linear(4, 4), act = slapo.nn.ReLU() },
      forward = function(self, x) return self.act(self.act(self.fc(x)) * 3 - 1) end })
    local x = slapo.randn({ 2, 4 })
    local ref = m:clone()
    ref(x):sum():backward()
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { x } })
    local found = sch:find(function(t)
      return slapo.pattern.call_module("act", slapo.pattern.call_module("fc", t))
    end)
    eq(1, #found)
    sch:checkpoint(found[1])
    eq("Linear", sch["CheckPointWrapper_0.fc"].mod:type())
    eq("ReLU", sch["act"].mod:type(), "still called outside the wrapper")
    m(x):sum():backward()
    close(ref.fc.weight.grad, m.CheckPointWrapper_0.fc.weight.grad)
  end)

  it("fuse without a compiler groups the leaves it calls as its children (test_fallback_fusion)", function()
    local x = slapo.randn({ 2, 4 })
    local m, sch, expected = traced(x)
    local fused = sch:fuse(relu_of_fc(sch), { compiler = "none", name = "FusedLinearReLU" })
    eq("FusedLinearReLU_0", fused.name)
    eq("Linear", sch["FusedLinearReLU_0.block.fc"].mod:type())
    eq("ReLU", sch["FusedLinearReLU_0.block.act"].mod:type())
    close(expected, m(x))
  end)

  it("copies with the leaves back in their places, in their order, and no wrapper", function()
    local x = slapo.randn({ 2, 4 })
    local m = checkpointed(x)
    local copy = m:clone()
    eq("block.fc.weight,block.fc.bias,out.weight,out.bias", param_names(copy))
    close(m(x), copy(x))
  end)

  it("saves under the model's own names: from_pretrained loads it as the unscheduled model", function()
    local model = bert()
    local x = ids()
    local sch = slapo.create_schedule(model)
    local sub = sch[attention]
    sub:trace({ inputs = { slapo.randn(hidden) } })
    local found = sub:find(function(t) return slapo.pattern.call_module("query", t) end)
    eq(1, #found)
    sub:checkpoint(found[1])
    eq("Linear", sch[attention .. ".CheckPointWrapper_0.query"].mod:type())
    local dir = os.tmpname()
    os.remove(dir)
    slapo.save(model, dir)
    local loaded = slapo.models.from_pretrained(dir)
    os.execute("rm -rf '" .. dir .. "'")
    model:eval()
    loaded:eval()
    close(model(x), loaded(x))
  end)
end)

-- Slapo's test_vertical_replacement / test_horizontal_replacement: syncs of swallowed leaves move
-- onto the new module when they see the same tensor there, and are refused otherwise.
describe("replace(subgraph) and the syncs of the leaves it swallows", function()
  local function chain()
    slapo.manual_seed(12)
    return slapo.nn.Module({ type = "Chain",
      children = { linear = slapo.nn.Linear(8, 8), ln = slapo.nn.LayerNorm(8), act = slapo.nn.ReLU() },
      forward = function(self, x) return self.act(self.ln(self.linear(x))) end })
  end
  local function linear_ln(x)
    return slapo.pattern.call_module("ln", slapo.pattern.call_module("linear", x))
  end
  local function traced(m)
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { slapo.randn({ 2, 8 }) } })
    return sch
  end
  local function same_as_subgraph(sch)
    return function(x) return sch.mod.ln(sch.mod.linear(x)) end
  end

  it("moves fwd_pre syncs of the leaf that reads the subgraph's input onto the new module", function()
    local m = chain()
    local sch = traced(m)
    local seen = {}
    sch["linear"]:sync("fwd_pre", function(x) table.insert(seen, x:size(1)); return x * 2 end)
    local x = slapo.randn({ 2, 8 })
    local expected = m(x)
    eq(1, #seen)
    local new = sch:replace(same_as_subgraph(sch), sch:find(linear_ln), { name = "fused" })
    eq("fused_0", new.name)
    close(expected, m(x))  -- the doubling still happens, now before the new module
    eq(2, #seen, "the sync ran once more, on the new module")
    -- the printed tree shows the sync where it runs now, and says where it came from
    local tree = tostring(sch)
    matches("%(fused_0%)[^\n]*sync%(\"fwd_pre\", .-%) from linear", tree)
    assert(not tree:match("%(linear%)[^\n]*sync"), "the sync is still shown on linear:\n" .. tree)
  end)

  it("moves fwd_post syncs of the leaf that gives the subgraph's only result", function()
    local m = chain()
    local sch = traced(m)
    local ran = 0
    sch["ln"]:sync("fwd_post", function(y) ran = ran + 1; return y + 1 end)
    local x = slapo.randn({ 2, 8 })
    local expected = m(x)
    sch:replace(same_as_subgraph(sch), sch:find(linear_ln))
    close(expected, m(x))
    eq(2, ran)
  end)

  it("refuses fwd_post syncs on an inner leaf, and leaves the leaf, its sync and the graph as they were", function()
    local m = chain()
    local sch = traced(m)
    local ran = 0
    sch["linear"]:sync("fwd_post", function(y) ran = ran + 1; return y end)
    local before = tostring(sch:graph())
    local err = pcall_err(sch.replace, sch, same_as_subgraph(sch), sch:find(linear_ln))
    matches("replace: the subgraph of the root module calls 'linear', which has 1 sync%(s%) or hook%(s%); its " ..
      "fwd_post syncs move to the new module only when 'linear' gives the subgraph's only result", err)
    eq(before, tostring(sch:graph()))
    m(slapo.randn({ 2, 8 }))
    eq(1, ran, "the sync still runs on the leaf")
  end)

  it("gives the syncs back to the leaf when the replacement's check fails", function()
    local m = chain()
    local sch = traced(m)
    local ran = 0
    sch["linear"]:sync("fwd_pre", function(x) ran = ran + 1; return x end)
    matches("gives other results than the subgraph",
      pcall_err(sch.replace, sch, function(x) return x end, sch:find(linear_ln)))
    m(slapo.randn({ 2, 8 }))
    eq(1, ran)
    sch:replace(same_as_subgraph(sch), sch:find(linear_ln))
    m(slapo.randn({ 2, 8 }))
    eq(2, ran, "and they move with a later replace that passes")
  end)

  it("refuses a fwd_pre sync on one branch of a horizontal replacement (fc1|fc2)", function()
    local m = slapo.nn.Module({ type = "Core", children = { fc1 = slapo.nn.Linear(8, 8), fc2 = slapo.nn.Linear(8, 8) },
      forward = function(self, x) return self.fc1(x):transpose(0, 1) + self.fc2(x):transpose(0, 1) end })
    local sch = traced(m)
    sch["fc1"]:sync("fwd_pre", function(x) return x end)
    local found = sch:find(function(x) return slapo.pattern.call_module("fc1|fc2", x):transpose(0, 1) end)
    eq(2, #found)
    matches("which has 1 sync%(s%) or hook%(s%); its fwd_pre/bwd_post syncs would also change what %%%d+ reads",
      pcall_err(sch.replace, sch, function(x) return { x, x } end, found, { check = false }))
  end)
end)

describe("a match whose inner value is also used outside it (Slapo's diamond)", function()
  local function escape()
    return slapo.nn.Module({ type = "Escape", forward = function(self, x, y)
      local a = x + y
      return a * 2 + a * 3 + a * 5
    end })
  end
  local function pattern(x, y)
    local a = x + y
    return a * 2 + a * 3
  end
  local x, y = slapo.randn({ 4 }), slapo.randn({ 4 })

  local function traced()
    local m = escape()
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { x, y } })
    return m, sch
  end

  it("is found; the escaping value becomes a result of the subgraph, in graph order", function()
    local m, sch = traced()
    local expected = m(x, y)
    local found = sch:find(pattern)
    eq(1, #found)
    eq("aten::add aten::mul aten::mul aten::add", ops(found[1]))
    matches("gives other results", pcall_err(sch.replace, sch, function(p, q)
      local a = p + q
      return { a * 5, a }
    end, found[1]))
    sch:replace(function(p, q)
      local a = p + q
      return { a, a * 5 }
    end, found[1])
    close(expected, m(x, y))
  end)

  it("is checkpointed with the same result and gradients", function()
    local m, sch = traced()
    local xr, yr = x:clone():requires_grad(true), y:clone():requires_grad(true)
    escape()(xr, yr):sum():backward()
    sch:checkpoint(sch:find(pattern)[1])
    local xg, yg = x:clone():requires_grad(true), y:clone():requires_grad(true)
    m(xg, yg):sum():backward()
    close(xr.grad, xg.grad)
    close(yr.grad, yg.grad)
  end)
end)
