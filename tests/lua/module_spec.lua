-- Module handles: layers, Lua-defined modules, iteration, state dicts, clones and lifetimes.
describe("nn layers", function()
  it("Linear computes x W^T + b with PyTorch's shapes", function()
    local fc = slapo.nn.Linear(4, 3)
    eq("Linear", fc:type())
    eq({ 3, 4 }, fc.weight:size())
    eq(15, fc:num_params())
    local x = slapo.randn({ 2, 4 })
    close(x:matmul(fc.weight:t()) + fc.bias, fc(x))
  end)

  it("Sequential chains its children", function()
    local seq = slapo.nn.Sequential({ slapo.nn.Linear(4, 8), slapo.nn.ReLU(), slapo.nn.Linear(8, 2) })
    local x = slapo.randn({ 3, 4 })
    local h = slapo.F.relu(seq["0"](x))
    close(seq["2"](h), seq(x))
  end)
end)

describe("Lua-defined modules", function()
  local function make_block()
    return slapo.nn.Module({
      type = "MyBlock",
      children = { fc = slapo.nn.Linear(4, 4) },
      params = { scale = slapo.ones({ 4 }) * 0.5 },
      forward = function(self, x)
        return slapo.F.relu(self.fc(x)) * self.scale
      end,
    })
  end

  it("match the same computation written directly, forward and backward", function()
    slapo.manual_seed(1)
    local block = make_block()
    local x = slapo.randn({ 3, 4 })
    local y = block(x)
    local w, b = block.fc.weight, block.fc.bias
    local expected = slapo.F.relu(slapo.F.linear(x, w, b)) * 0.5
    close(expected, y)
    y:sum():backward()
    -- d sum(relu(x W^T + b) * 0.5) / dW = dy^T x, with dy = 0.5 where the pre-activation is positive
    local pre = slapo.F.linear(x, w, b):detach()
    local dy = (slapo.ones({ 3, 4 }) - pre:eq(slapo.F.relu(pre)):eq(0):float()) * 0.5
    close(dy:t():matmul(x), w.grad)
    close(dy:sum(0), b.grad)
  end)

  it("report their type, children and parameters", function()
    local block = make_block()
    eq("MyBlock", block:type())
    eq(24, block:num_params())
    local names = {}
    for name in block:named_parameters() do
      table.insert(names, name)
    end
    eq({ "scale", "fc.weight", "fc.bias" }, names)
    matches("MyBlock: no method, child or parameter 'fcc'", pcall_err(function() return block.fcc end))
  end)

  it("raise errors from forward with the module type and the Lua line", function()
    local bad = slapo.nn.Module({
      type = "Broken",
      forward = function(self, x)
        error("no way")
      end,
    })
    local ok, err = pcall(bad, slapo.ones({ 1 }))
    assert(not ok)
    matches("^Broken%.forward: tests/lua/module_spec%.lua:%d+: no way", err)
  end)

  it("check their definition", function()
    matches("nn.Module: 'forward' must be a function", pcall_err(function() slapo.nn.Module({ type = "X" }) end))
    matches("nn.Module: unknown field 'childs'", pcall_err(function()
      slapo.nn.Module({ childs = {}, forward = function() end })
    end))
  end)
end)

describe("module handles", function()
  it("state_dict and load_state_dict round-trip, and bad shapes change nothing", function()
    local a, b = slapo.nn.Linear(3, 2), slapo.nn.Linear(3, 2)
    b:load_state_dict(a:state_dict())
    assert(a.weight:equal(b.weight))
    local before = b.weight:clone()
    matches("load_state_dict: 'weight' has shape %[2, 3%] in the module but %[3, 3%]", pcall_err(function()
      b:load_state_dict({ bias = slapo.zeros({ 2 }), weight = slapo.zeros({ 3, 3 }) })
    end))
    assert(b.weight:equal(before))
  end)

  it("clone copies parameters deeply", function()
    local a = slapo.nn.Linear(3, 2)
    local c = a:clone()
    assert(a.weight:equal(c.weight))
    c:load_state_dict({ weight = slapo.zeros({ 2, 3 }), bias = slapo.zeros({ 2 }) })
    eq(0, c.weight:abs():sum():item())
    assert(a.weight:abs():sum():item() > 0, "the original kept its weights")
  end)

  it("free their modules when dropped and collected", function()
    collectgarbage()
    collectgarbage()
    local before = slapo._live_modules()
    local model = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64, n_positions = 16 })
    assert(slapo._live_modules() > before)
    local sch = slapo.create_schedule(model)
    local sub = sch["transformer.h.0"]
    model, sch, sub = nil, nil, nil
    collectgarbage()
    collectgarbage()
    eq(before, slapo._live_modules())
  end)
end)

describe("Lua-defined modules against C++ modules", function()
  it("compute what the C++ MLP computes, outputs and gradients", function()
    slapo.manual_seed(4)
    local mlp = slapo.models.mlp({ hidden_size = 8, intermediate_size = 16, hidden_act = "relu" })
    local copy = mlp:clone()
    local lua_mlp = slapo.nn.Module({
      type = "LuaMLP",
      children = { fc1 = copy.fc1, fc2 = copy.fc2 },
      forward = function(self, x) return self.fc2(slapo.F.relu(self.fc1(x))) end,
    })
    local x = slapo.randn({ 4, 8 })
    local y_cpp, y_lua = mlp(x), lua_mlp(x)
    close(y_cpp, y_lua)
    local loss_cpp, loss_lua = (y_cpp * y_cpp):sum(), (y_lua * y_lua):sum()
    loss_cpp:backward()
    loss_lua:backward()
    close(mlp.fc1.weight.grad, lua_mlp.fc1.weight.grad)
    close(mlp.fc2.bias.grad, lua_mlp.fc2.bias.grad)
  end)
end)

describe("Lua-defined modules across processes", function()
  it("register children and parameters in name order, whatever order Lua's table iterates in", function()
    -- Lua's pairs() order differs between processes; every rank must see one order, since
    -- per-parameter collectives walk the parameters in it.
    local m = slapo.nn.Module({ type = "Ordered",
      children = { zeta = slapo.nn.Linear(2, 2), alpha = slapo.nn.Linear(2, 2), mid = slapo.nn.Linear(2, 2) },
      params = { weight = slapo.ones({ 2 }), bias = slapo.zeros({ 2 }), gamma = slapo.ones({ 2 }), beta = slapo.ones({ 2 }) },
      forward = function(self, x) return x end })
    local names = {}
    for name in m:named_parameters() do
      table.insert(names, name)
    end
    eq({ "beta", "bias", "gamma", "weight", "alpha.weight", "alpha.bias", "mid.weight", "mid.bias", "zeta.weight",
      "zeta.bias" }, names)
  end)
end)
