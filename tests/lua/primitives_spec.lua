-- Primitives on one rank: their checks, their effect, that a failure changes nothing, and that
-- the log replays on a fresh model.
local function tiny_gpt2()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32, n_positions = 8 })
end

describe("replace", function()
  it("swaps a module in its parent's slot and the schedule follows", function()
    local model = tiny_gpt2():eval()
    local sch = slapo.create_schedule(model)
    local ids = slapo.randint(0, 32, { 1, 5 })
    local before = model(ids)
    local mlp = sch["transformer.h.0.mlp"]
    local calls = 0
    local wrapper = slapo.nn.Module({
      type = "CountingMLP",
      children = { inner = mlp.mod },
      forward = function(self, x)
        calls = calls + 1
        return self.inner(x)
      end,
    })
    mlp:replace(wrapper)
    eq("CountingMLP", sch["transformer.h.0.mlp"].mod:type())
    eq("GPT2MLP", sch["transformer.h.0.mlp.inner"].mod:type())
    close(before, model(ids))
    eq(1, calls)
    matches('sch%["transformer%.h%.0%.mlp"%]:replace%(args%[1%]%)', sch:log())
  end)

  it("refuses the root and cycles, changing nothing", function()
    local sch = slapo.create_schedule(tiny_gpt2())
    matches("replace: cannot replace the root module", pcall_err(function() sch:replace(slapo.nn.Identity()) end))
    local h = sch["transformer.h"]
    matches("replace: cannot put an ancestor %('transformer'", pcall_err(function()
      h["0.mlp"]:replace(sch["transformer"].mod)
    end))
    matches("must be a module, got number", pcall_err(function() h["0"]:replace(3) end))
    eq("GPT2Block", sch["transformer.h.0"].mod:type())
    matches("0 primitives", sch:log())
  end)

  it("replace_all swaps every module of a type", function()
    local sch = slapo.create_schedule(tiny_gpt2())
    local n = sch:replace_all("NewGELUActivation", function(path, old)
      return slapo.nn.GELU({ approximate = "tanh" })
    end)
    eq(2, n)
    eq("GELU", sch["transformer.h.1.mlp.act"].mod:type())
    matches("make_fn returned nil for 'transformer%.h%.0%.mlp%.act'", pcall_err(function()
      sch:replace_all("GELU", function() end)
    end))
    eq("GELU", sch["transformer.h.0.mlp.act"].mod:type())
  end)
end)

describe("shard", function()
  it("checks the parameter, the axis and repeated shards", function()
    local sch = slapo.create_schedule(tiny_gpt2())
    local c_fc = sch["transformer.h.0.mlp.c_fc"]
    eq("shard: 'transformer.h.0.mlp.c_fc' (Conv1D) has no parameter 'wieght' (did you mean 'weight'?); "
      .. "its parameters are: weight, bias", pcall_err(function() c_fc:shard("wieght", 0) end))
    matches("shard: axis 2 is out of range for 'weight' of 'transformer%.h%.0%.mlp%.c_fc' with shape %[16, 64%] %(valid: 0 %.%. 1%)",
      pcall_err(function() c_fc:shard("weight", 2) end))
    c_fc:shard("weight", 1)
    matches("already sharded along axis 1", pcall_err(function() c_fc:shard("weight", 0) end))
    matches("axis for 'bias' of 'transformer%.h%.0%.mlp%.c_fc' must be a number", pcall_err(function()
      c_fc:shard("bias", "0")
    end))
  end)

  it("records the full shape and keeps tied weights tied", function()
    local sch = slapo.create_schedule(tiny_gpt2())
    sch["transformer.wte"]:shard("weight", 0)
    local info = sch["transformer.wte"]:param_info("weight")
    eq({ 32, 16 }, info.full_shape)
    eq(0, info.shard_axis)
    eq(sch["lm_head"].mod.weight:size(), sch["transformer.wte"].mod.weight:size())
  end)
end)

describe("sync", function()
  it("names the mode and op choices", function()
    local sch = slapo.create_schedule(tiny_gpt2())
    local attn = sch["transformer.h.0.attn"]
    matches("sync: unknown mode 'fwd' for 'transformer%.h%.0%.attn' %(choices: fwd_pre, fwd_post, bwd_post, bwd_params%)",
      pcall_err(function() attn:sync("fwd", "all_reduce") end))
    matches("sync: unknown op 'allreduce'.*choices: all_reduce, all_gather", pcall_err(function()
      attn:sync("fwd_post", "allreduce")
    end))
    matches("op 'all_gather' for 'transformer%.h%.0%.attn' needs an axis", pcall_err(function()
      attn:sync("fwd_post", "all_gather")
    end))
    matches("bwd_post.*op must be 'all_reduce'", pcall_err(function() attn:sync("bwd_post", "scatter", { axis = 0 }) end))
    matches("0 primitives", sch:log())
  end)

  it("runs a Lua function on the output", function()
    local model = tiny_gpt2():eval()
    local sch = slapo.create_schedule(model)
    local ids = slapo.randint(0, 32, { 1, 4 })
    local before = model(ids)
    sch["lm_head"]:sync("fwd_post", function(out) return out * 2 end)
    close(before * 2, model(ids))
  end)
end)

describe("annotate", function()
  it("attaches metadata that param_info reports", function()
    local sch = slapo.create_schedule(tiny_gpt2())
    sch["transformer.ln_f"]:annotate("weight", "replicated", true)
    eq({ replicated = true }, sch["transformer.ln_f"]:param_info("weight").annotations)
    matches("annotate: 'transformer%.ln_f' %(LayerNorm%) has no parameter 'w'", pcall_err(function()
      sch["transformer.ln_f"]:annotate("w", "k", 1)
    end))
  end)
end)

describe("the schedule log", function()
  it("replays on a fresh model to the same schedule", function()
    local sch = slapo.create_schedule(tiny_gpt2())
    sch["transformer.h.0.mlp.c_fc"]:shard("weight", 1):shard("bias", 0)
    sch["transformer.h.0.mlp.c_proj"]:shard("weight", 0):sync("fwd_post", "all_reduce")
    sch["transformer.ln_f"]:annotate("weight", "note", "kept")
    sch["transformer.h.1"]:replace(slapo.nn.Identity())
    local source = sch:log()
    matches('sch%["transformer%.h%.0%.mlp%.c_fc"%]:shard%("weight", 1%)  %-%- tests/lua/primitives_spec%.lua:%d+', source)
    local fresh = slapo.create_schedule(tiny_gpt2())
    load(source)()(fresh, sch:log_args())
    local function without_sources(log)
      return (log:gsub("  %-%- [^\n]*", ""))
    end
    eq(without_sources(sch:log()), without_sources(fresh:log()))
    eq(tostring(sch), tostring(fresh))
  end)
end)

describe("checkpoint", function()
  local function bert()
    slapo.manual_seed(3)
    return slapo.models.bert({ hidden_size = 32, num_hidden_layers = 3, num_attention_heads = 4,
      intermediate_size = 64, vocab_size = 50, hidden_dropout_prob = 0.2, attention_probs_dropout_prob = 0.2 })
  end

  it("gives bit-identical outputs and gradients with dropout on", function()
    local plain = bert():train()
    local sch = slapo.create_schedule(plain:clone():train())
    for i = 0, 2 do
      sch["bert.encoder.layer." .. i]:checkpoint()
    end
    local ids = slapo.randint(0, 50, { 2, 6 })
    local losses = {}
    for i, m in ipairs({ plain, sch.mod }) do
      slapo.manual_seed(99)
      losses[i] = m(ids, { labels = ids })
      losses[i]:backward()
      -- the random stream after the step is where it would be without checkpointing
      losses[i .. "next"] = slapo.randn({ 1 }):item()
    end
    assert(losses[1]:equal(losses[2]), "losses differ")
    eq(losses["1next"], losses["2next"])
    local theirs = {}
    for name, p in sch.mod:named_parameters() do
      theirs[name] = p
    end
    local compared = 0
    for name, p in plain:named_parameters() do
      assert(p.grad:equal(theirs[name].grad), name .. ": gradients differ")
      compared = compared + 1
    end
    assert(compared > 30)
  end)

  it("frees the layers' activations in forward and recomputes them in backward", function()
    -- deep and long enough that saved activations dominate the step's memory
    local function gpt2()
      slapo.manual_seed(5)
      return slapo.models.gpt2({ n_embd = 64, n_layer = 6, n_head = 4, vocab_size = 64, n_positions = 256,
        resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
    end
    local ids = slapo.randint(0, 64, { 4, 256 })
    local function counted(sch, checkpointed)
      local calls = 0
      local mlp = sch["transformer.h.2.mlp"]
      mlp:replace(slapo.nn.Module({ type = "CountingMLP", children = { inner = mlp.mod },
        forward = function(self, x) calls = calls + 1; return self.inner(x) end }))
      if checkpointed then
        for i = 0, 5 do sch["transformer.h." .. i]:checkpoint() end
      end
      local step = function() sch.mod(ids, { labels = ids }):backward() end
      return slapo.peak_tensor_mib(step), function() return calls end
    end
    local plain_mib, plain_calls = counted(slapo.create_schedule(gpt2()), false)
    local ckpt_mib, ckpt_calls = counted(slapo.create_schedule(gpt2()), true)
    eq(1, plain_calls(), "forward calls of a layer's MLP in one step without checkpointing")
    eq(2, ckpt_calls(), "forward calls with checkpointing: the forward, and its recomputation in backward")
    assert(ckpt_mib < 0.6 * plain_mib,
      ("peak of a step: %.1f MiB checkpointed, %.1f MiB without"):format(ckpt_mib, plain_mib))
  end)

  it("refuses the root and a second checkpoint", function()
    local sch = slapo.create_schedule(bert())
    matches("checkpoint: the root module cannot be checkpointed", pcall_err(function() sch:checkpoint() end))
    sch["bert.encoder.layer.0"]:checkpoint()
    matches("already checkpointed", pcall_err(function() sch["bert.encoder.layer.0"]:checkpoint() end))
    matches("checkpoint%(%)", sch:log())
  end)
end)

describe("fork_rng", function()
  it("draws dropout masks from the module's own stream, leaving the default stream alone", function()
    local sch = slapo.create_schedule(slapo.nn.Sequential({ slapo.nn.Dropout(0.5) }))
    sch["0"]:fork_rng(5)
    local x = slapo.ones({ 64 })
    slapo.manual_seed(1)
    local a = sch.mod(x)
    local after_a = slapo.randn({ 1 }):item()
    slapo.manual_seed(1)
    local b = sch.mod(x)
    local after_b = slapo.randn({ 1 }):item()
    assert(not a:equal(b), "the module's stream advances across calls")
    eq(after_a, after_b, "the default stream is not consumed by the forked module")
    matches("already has its own random stream", pcall_err(function() sch["0"]:fork_rng() end))
  end)
end)

describe("help", function()
  it("describes every primitive and the functions around them, and suggests the closest name", function()
    for _, name in ipairs(slapo.list_primitives()) do
      assert(#slapo.help(name) > 20, name)
    end
    matches("^slapo%.verify%(sch, inputs", slapo.help("verify"))
    matches("^slapo%.train{model =", slapo.help("train"))
    matches("functions: autoshard, build, create_schedule", slapo.help())
    matches("help: no primitive or function 'shrad', did you mean 'shard'%?", pcall_err(function() slapo.help("shrad") end))
  end)
end)
