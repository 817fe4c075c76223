-- trace and find on the zoo (after Slapo's test_trace.py): graphs of aten ops with leaf calls,
-- same outputs and gradients, leaves still replaceable, data-dependent forwards refused.
local function gpt2()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 50, n_positions = 16 })
end

local function ops(graph)
  local out = {}
  for _, n in ipairs(graph.nodes) do
    table.insert(out, n.op .. (n.target and ("(" .. n.target .. ")") or ""))
  end
  return table.concat(out, " ")
end

describe("trace", function()
  it("takes example inputs like those of the module's last call when given none", function()
    local model = gpt2()
    local sch = slapo.create_schedule(model)
    matches("has not run yet, so its inputs are unknown", pcall_err(function()
      sch["transformer.h.0.mlp"]:trace({})
    end))
    model(slapo.randint(0, 50, { 3, 7 }))
    sch["transformer.h.0.mlp"]:trace({ flatten = true })
    model:eval()
    eq({ 3, 7, 50 }, model(slapo.randint(0, 50, { 3, 7 })):size())
    matches("input 1 has shape %[2, 7, 32%] but the trace was taken with %[3, 7, 32%]", pcall_err(function()
      model(slapo.randint(0, 50, { 2, 7 }))
    end))
  end)

  it("keeps direct children as calls by default", function()
    local sch = slapo.create_schedule(gpt2())
    sch["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 5, 32 }) } })
    eq("slapo::call_module(c_fc) slapo::call_module(act) slapo::call_module(c_proj) slapo::call_module(dropout)",
      ops(sch["transformer.h.0.mlp"]:graph()))
  end)

  it("inlines children with flatten and keeps outputs and gradients", function()
    local sch = slapo.create_schedule(gpt2())
    local ids = slapo.randint(0, 50, { 2, 5 })
    slapo.verify(sch, { ids }, {}, function(s)
      for i = 0, 1 do
        s["transformer.h." .. i .. ".mlp"]:trace({ inputs = { slapo.randn({ 2, 5, 32 }) }, leaves = { "c_fc" },
          flatten = true })
      end
    end)
    local text = ops(sch["transformer.h.1.mlp"]:graph())
    matches("^slapo::call_module%(c_fc%) ", text)
    matches("aten::gelu", text)   -- NewGELUActivation, inlined
    matches("aten::addmm", text)  -- c_proj's Conv1D, inlined
    matches("graph%(", tostring(sch["transformer.h.1.mlp"]:graph()))
  end)

  it("leaves stay reachable: replacing one changes what the graph calls", function()
    local model = gpt2():eval()
    local sch = slapo.create_schedule(model)
    local ids = slapo.randint(0, 50, { 1, 4 })
    local before = model(ids)
    sch["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 1, 4, 32 }) } })
    local calls = 0
    local c_fc = sch["transformer.h.0.mlp.c_fc"]
    c_fc:replace(slapo.nn.Module({ type = "Counting", children = { inner = c_fc.mod },
      forward = function(self, x) calls = calls + 1 return self.inner(x) end }))
    close(before, model(ids))
    eq(1, calls)
  end)

  it("find returns the call nodes whose leaf path matches", function()
    local sch = slapo.create_schedule(gpt2())
    local mlp = sch["transformer.h.0.mlp"]
    matches("find: 'transformer%.h%.0%.mlp' is not traced", pcall_err(function() mlp:find("c_") end))
    mlp:trace({ inputs = { slapo.randn({ 2, 3, 32 }) } })
    local found = mlp:find("^c_")
    eq(2, #found)
    eq("c_fc", found[1][1].target)
    eq("c_proj", found[2][1].target)
    eq(found[1][1].name, found[1][1].name:match("^%%.*"))
  end)

  it("refuses a forward that reads a tensor's value, and other input shapes", function()
    local branchy = slapo.nn.Module({ type = "Branchy", children = { fc = slapo.nn.Linear(4, 4) },
      forward = function(self, x)
        if x:sum():item() > 0 then return self.fc(x) end
        return x
      end })
    local sch = slapo.create_schedule(slapo.nn.Sequential({ branchy }))
    matches("trace: tracing '0' failed: Branchy%.forward: .*Tensor:item%(%) reads a tensor's value while tracing",
      pcall_err(function()
      sch["0"]:trace({ inputs = { slapo.ones({ 2, 4 }) } })
    end))
    local sch2 = slapo.create_schedule(gpt2())
    sch2["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 5, 32 }) } })
    matches("input 1 has shape %[1, 5, 32%] but the trace was taken with %[2, 5, 32%]", pcall_err(function()
      sch2.mod(slapo.randint(0, 50, { 1, 5 }))
    end))
  end)

  -- Slapo's suite found this: a leaf called as self.sc(x, 3) computed x * 1 once traced.
  it("replays a leaf's non-tensor arguments (numbers, strings, nil) as the call passed them", function()
    local scale = slapo.nn.Module({ type = "Scale", forward = function(self, x, k, how)
      local y = x * (k or 1)
      return how == "neg" and -y or y
    end })
    local outer = slapo.nn.Module({ type = "Outer", children = { sc = scale }, forward = function(self, x)
      return self.sc(x, 3) + self.sc(x, 2, "neg") + self.sc(x, nil)
    end })
    local sch = slapo.create_schedule(outer)
    local x = slapo.randn({ 2, 4 })
    local before = outer(x)
    close(x * 2, before)
    sch:trace({ inputs = { x } })
    close(before, outer(x))
    -- a table holding tensors cannot become a constant of the graph
    local takes_table = slapo.nn.Module({ type = "Outer2", children = { sc = slapo.nn.Module({ type = "T",
      forward = function(self, x, opts) return x * opts.w end }) },
      forward = function(self, x) return self.sc(x, { w = x }) end })
    matches("trace: leaf 'sc' is called with a .* holding tensors as argument 2",
      pcall_err(function() slapo.create_schedule(takes_table):trace({ inputs = { x } }) end))
  end)

  it("replays from the log with the example inputs", function()
    local sch = slapo.create_schedule(gpt2())
    sch["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 5, 32 }) }, leaves = { "c_fc" }, flatten = true })
    matches('sch%["transformer%.h%.0%.mlp"%]:trace%(args%[1%]%)', sch:log())
    local fresh = slapo.create_schedule(gpt2())
    load(sch:log())()(fresh, sch:log_args())
    eq(ops(sch["transformer.h.0.mlp"]:graph()), ops(fresh["transformer.h.0.mlp"]:graph()))
  end)
end)

describe("decompose, trace and fuse", function()
  it("fuse bias + GELU into the kernel and keep outputs and gradients (the issue's done-means flow)", function()
    local sch = slapo.create_schedule(gpt2())
    local ids = slapo.randint(0, 50, { 2, 5 })
    local fused = 0
    slapo.verify(sch, { ids }, {}, function(s)
      for i = 0, 1 do
        local mlp = s["transformer.h." .. i .. ".mlp"]
        mlp["c_fc"]:decompose()
        mlp:trace({ inputs = { slapo.randn({ 2, 5, 32 }) }, flatten = true })
        fused = fused + mlp:fuse(nil, { compiler = "kernels" })
      end
    end)
    eq(2, fused)
    local text = ops(sch["transformer.h.0.mlp"]:graph())
    matches("slapo::bias_gelu", text)
    assert(not text:find("aten::gelu"), text)
  end)

  it("hands a whole traced module to LibTorch's passes with compiler = \"torchscript\"", function()
    local sch = slapo.create_schedule(gpt2())
    local ids = slapo.randint(0, 50, { 2, 5 })
    local removed
    slapo.verify(sch, { ids }, {}, function(s)
      local mlp = s["transformer.h.0.mlp"]
      mlp:trace({ inputs = { slapo.randn({ 2, 5, 32 }) }, flatten = true })
      removed = mlp:fuse(nil, { compiler = "torchscript" })
    end)
    assert(removed > 0, "constant propagation and CSE remove nodes from a traced MLP")
    matches('sch%["transformer%.h%.0%.mlp"%]:fuse%(nil, {compiler = "torchscript"}%)', sch:log())
  end)

  it("explains what it looked for when nothing matches, and checks its inputs", function()
    local sch = slapo.create_schedule(gpt2())
    local mlp = sch["transformer.h.0.mlp"]
    matches("fuse: 'transformer%.h%.0%.mlp' is not traced", pcall_err(function() mlp:fuse(nil, {}) end))
    mlp:trace({ inputs = { slapo.randn({ 2, 5, 32 }) }, flatten = true })
    matches("no kernel pattern in 'transformer%.h%.0%.mlp' %(looked for: matmul %-> bias add %-> gelu",
      pcall_err(function() mlp:fuse(nil, { compiler = "kernels" }) end))
    matches("unknown compiler 'tvm'.*choices: kernels, torchscript",
      pcall_err(function() mlp:fuse(nil, { compiler = "tvm" }) end))
    matches("decompose: 'transformer%.h%.0%.mlp%.act' is a NewGELUActivation", pcall_err(function()
      mlp["act"]:decompose()
    end))
    matches("decompose: the parent of 'transformer%.h%.0%.mlp%.c_fc' is traced already", pcall_err(function()
      mlp["c_fc"]:decompose()
    end))
  end)
end)

describe("fuse the LayerNorm tail (bias + dropout + residual + LayerNorm)", function()
  local function bert()
    slapo.manual_seed(10)
    return slapo.models.bert({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
      intermediate_size = 64, vocab_size = 50, max_position_embeddings = 16, hidden_dropout_prob = 0.2 })
  end
  local ids = slapo.randint(0, 50, { 2, 9 })
  local tails = { ["attention.output"] = 32, output = 64 }  -- each tail's dense input width

  local function fuse_tails(s)
    local fused = 0
    for _, layer in ipairs(s["bert.encoder.layer"]:children()) do
      for path, width in pairs(tails) do
        layer[path]["dense"]:decompose()
        layer[path]:trace({ inputs = { slapo.randn({ 2, 9, width }), slapo.randn({ 2, 9, 32 }) }, flatten = true })
        fused = fused + layer[path]:fuse(nil, { compiler = "kernels" })
      end
    end
    return fused
  end

  it("keeps outputs and gradients with dropout on (same masks) and off: the fused op follows train/eval", function()
    local fused = 0
    local sch = slapo.create_schedule(bert())
    local report = slapo.verify(sch, { ids }, { train = true }, function(s) fused = fuse_tails(s) end)
    eq(4, fused)
    eq(report.params, report.gradients, "every parameter's gradient compared")
    local text = ops(sch["bert.encoder.layer.1.output"]:graph())
    matches("slapo::leaf_dropout slapo::bias_dropout_add_layer_norm", text)
    assert(not text:find("aten::layer_norm") and not text:find("call_module"), text)
    slapo.verify(slapo.create_schedule(bert()), { ids }, {}, fuse_tails)  -- eval: no dropout at all

    -- the same model, switched: eval is deterministic, training draws masks
    local model = sch.mod
    model:eval()
    eq(0, (model(ids) - model(ids)):abs():max():item())
    model:train()
    assert((model(ids) - model(ids)):abs():max():item() > 0, "dropout is on in training mode")
  end)

  it("fuses a chosen tail into a child of its own", function()
    local report = slapo.verify(slapo.create_schedule(bert()), { ids }, { train = true }, function(s)
      local out = s["bert.encoder.layer.0.output"]
      out["dense"]:decompose()
      out:trace({ inputs = { slapo.randn({ 2, 9, 64 }), slapo.randn({ 2, 9, 32 }) }, flatten = true })
      local nodes = out:graph().nodes
      eq("aten::t aten::matmul aten::add slapo::call_module(dropout) aten::add aten::layer_norm", ops(out:graph()))
      local fused = out:fuse({ nodes[3], nodes[4], nodes[5], nodes[6] }, { compiler = "kernels", name = "DropoutAddLN" })
      eq("DropoutAddLN_0", fused.name)
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared")
  end)

  it("names the leaf when the dropout it fused is replaced by something else", function()
    local sch = slapo.create_schedule(bert())
    fuse_tails(sch)
    sch["bert.encoder.layer.0.output.dropout"]:replace(slapo.nn.Identity())
    matches("fused LayerNorm tail: leaf 'dropout' was a Dropout when fuse rewrote the graph; it is now Identity",
      pcall_err(function() sch.mod(ids) end))
  end)
end)

describe("fuse LLaMA's RMSNorm and SwiGLU", function()
  local function llama()
    slapo.manual_seed(11)
    return slapo.models.llama({ hidden_size = 32, intermediate_size = 64, num_hidden_layers = 2, num_attention_heads = 4,
      num_key_value_heads = 2, vocab_size = 50, max_position_embeddings = 16 })
  end

  it("a whole decoder layer traced flat: both norms and the MLP fused, outputs and gradients kept", function()
    local fused = {}
    local sch = slapo.create_schedule(llama())
    local ids = slapo.randint(0, 50, { 2, 7 })
    local report = slapo.verify(sch, { ids }, {}, function(s)
      for i = 0, 1 do
        local mlp, norm = s["model.layers." .. i .. ".mlp"], s["model.layers." .. i .. ".input_layernorm"]
        mlp:trace({ inputs = { slapo.randn({ 2, 7, 32 }) }, flatten = true })
        norm:trace({ inputs = { slapo.randn({ 2, 7, 32 }) }, flatten = true })
        table.insert(fused, mlp:fuse(nil, { compiler = "kernels" }))
        table.insert(fused, norm:fuse(nil, { compiler = "kernels" }))
      end
    end)
    eq({ 1, 1, 1, 1 }, fused)
    eq(report.params, report.gradients, "every parameter's gradient compared")
    eq("aten::linear aten::linear slapo::swiglu aten::linear", ops(sch["model.layers.1.mlp"]:graph()))
    eq("slapo::rms_norm", ops(sch["model.layers.1.input_layernorm"]:graph()))
  end)

  it("leaves silu(x) times a broadcast tensor alone (the kernel is elementwise over one shape)", function()
    local block = slapo.nn.Module({ type = "Block", forward = function(self, x, w)
      return slapo.F.silu(x) * w
    end })
    local sch = slapo.create_schedule(slapo.nn.Sequential({ block }))
    sch["0"]:trace({ inputs = { slapo.randn({ 2, 3, 4 }), slapo.randn({ 4 }) }, flatten = true })
    matches("no kernel pattern in '0' %(looked for: .*silu%(gate%) %* up; x %* rsqrt",
      pcall_err(function() sch["0"]:fuse(nil, { compiler = "kernels" }) end))
  end)

  it("leaves a bfloat16 RMSNorm alone: its casts to float32 are real, and the kernel takes float32/64", function()
    local model = llama()
    model:to("bfloat16")
    local norm = slapo.create_schedule(model)["model.layers.0.input_layernorm"]
    norm:trace({ inputs = { slapo.randn({ 2, 7, 32 }):to("bfloat16") }, flatten = true })
    matches("no kernel pattern", pcall_err(function() norm:fuse(nil, { compiler = "kernels" }) end))
  end)
end)

describe("find with a traced pattern", function()
  local function traced(forward)
    local block = slapo.nn.Module({ type = "Block", children = { fc = slapo.nn.Linear(4, 4) }, forward = forward })
    local sch = slapo.create_schedule(slapo.nn.Sequential({ block }))
    sch["0"]:trace({ inputs = { slapo.randn({ 2, 4 }) }, flatten = true })
    return sch["0"]
  end

  it("matches relu(x) + x by dataflow: exactly its 2 nodes", function()
    local sub = traced(function(self, x)
      local h = self.fc(x)
      return slapo.F.relu(h) + h
    end)
    local found = sub:find(function(x) return slapo.F.relu(x) + x end)
    eq(1, #found)
    eq(2, #found[1])
    eq({ "aten::relu", "aten::add" }, { found[1][1].op, found[1][2].op })
  end)

  it("does not match when the wiring differs, even with the same ops in order", function()
    local sub = traced(function(self, x)
      local h = self.fc(x)
      return slapo.F.relu(h) + x  -- adds the input, not relu's operand
    end)
    eq(0, #sub:find(function(x) return slapo.F.relu(x) + x end))
    eq(1, #sub:find(function(x, y) return slapo.F.relu(x) + y end))
  end)
end)

describe("find with example inputs", function()
  it("traces the pattern on the given tensors when the default examples do not fit its ops", function()
    local m = slapo.nn.Module({ type = "M", children = { ln = slapo.nn.LayerNorm(8) },
      forward = function(self, x) return slapo.F.layer_norm(x * 2, { 8 }, self.ln.weight, self.ln.bias, 1e-5) end })
    local sch = slapo.create_schedule(m)
    sch:trace({ inputs = { slapo.randn({ 3, 8 }) }, flatten = true })
    local pattern = function(x, w, b) return slapo.F.layer_norm(x, { 8 }, w, b, 1e-5) end
    matches("give ones it accepts with find%(fn, {inputs = {...}}%)", pcall_err(sch.find, sch, pattern))
    local found = sch:find(pattern, { inputs = { slapo.randn({ 3, 8 }), slapo.randn({ 8 }), slapo.randn({ 8 }) } })
    eq(1, #found)
    matches("find: the pattern takes 3 arguments but {inputs = ...} gives 1", pcall_err(sch.find, sch, pattern,
      { inputs = { slapo.randn({ 3, 8 }) } }))
    matches("find on the root module: unknown option 'input'", pcall_err(sch.find, sch, pattern, { input = {} }))
  end)
end)

describe("patterns with numbers", function()
  it("record a number as a Scalar, as the zoo's C++ traces: x / 4 finds BERT's score scaling", function()
    slapo.manual_seed(1)
    local bert = slapo.models.bert({ hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2,
      intermediate_size = 64, vocab_size = 64, max_position_embeddings = 16, hidden_dropout_prob = 0,
      attention_probs_dropout_prob = 0 })
    local sch = slapo.create_schedule(bert)
    local sub = sch["bert.encoder.layer.0.attention.self"]
    sub:trace({ inputs = { slapo.randn({ 2, 8, 32 }) }, flatten = true })
    eq(1, #sub:find(function(x) return x / 4 end), "scores / sqrt(head_dim = 16)")
    -- softmax(x, -1) matches the zoo's softmax(x, -1, float32) on float32 scores (Slapo's suite:
    -- F.softmax lacked the dtype the graph carries), and not one that casts to another dtype
    eq(1, #sub:find(function(x) return slapo.F.softmax(x, -1) end))
    eq(0, #sub:find(function(x) return slapo.F.softmax(x, 0) end), "another dim")
    -- and number arithmetic follows PyTorch's promotion: an int tensor times 0.5 is a float tensor
    eq({ 0.5, 1 }, (slapo.tensor({ 1, 2 }, { dtype = "int64" }) * 0.5):tolist())
    eq(0.5, (2 / slapo.tensor({ 4.0 })):item())
  end)
end)
