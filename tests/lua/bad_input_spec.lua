-- Bad input, as a hostile user writes it: each call must raise an error that names the function,
-- what was wrong and the valid choices, and leave the schedule, its log and every parameter as
-- they were.
local function small_gpt2()
  slapo.manual_seed(3)
  return slapo.models.gpt2({ n_embd = 16, n_head = 2, n_layer = 2, vocab_size = 32, n_positions = 16 })
end

local function snapshot(sch)
  local params = {}
  for name, p in sch.mod:named_parameters() do
    params[name] = p:detach():clone()
  end
  return { log = sch:log(), tree = tostring(sch), params = params }
end

local function assert_unchanged(before, sch, what)
  eq(before.log, sch:log(), what .. ": the schedule log changed")
  eq(before.tree, tostring(sch), what .. ": the module tree changed")
  local seen = 0
  for name, p in sch.mod:named_parameters() do
    local old = before.params[name]
    assert(old, what .. ": a parameter appeared: " .. name)
    eq(old:size(), p:size(), what .. ": " .. name .. " changed shape")
    assert(old:equal(p:detach()), what .. ": " .. name .. " changed value")
    seen = seen + 1
  end
  local count = 0
  for _ in pairs(before.params) do count = count + 1 end
  eq(count, seen, what .. ": parameters disappeared")
end

-- { what, function(sch) bad call end, text the message must contain, setup = valid calls first }
local schedule_cases = {
  { "shard a fractional axis", function(s) s["transformer.h.0.mlp.c_fc"]:shard("weight", 0.5) end,
    "shard: axis must be an integer from -64 to 63, got 0.5" },
  { "shard with a string for options", function(s) s["transformer.h.0.mlp.c_fc"]:shard("weight", 1, "groups=2") end,
    "shard: options must be a table, got string" },
  { "shard with an unknown option", function(s) s["transformer.h.0.mlp.c_fc"]:shard("weight", 1, { groupz = 2 }) end,
    "shard: unknown option 'groupz' (valid: groups)" },
  { "shard an axis of NaN", function(s) s["transformer.h.0.mlp.c_fc"]:shard("weight", 0 / 0) end,
    "shard: axis must be an integer from -64 to 63, got NaN" },
  { "shard into 0 groups", function(s) s["transformer.h.0.attn.c_attn"]:shard("weight", 1, { groups = 0 }) end,
    "shard: groups must be an integer from 1 to 1048576, got 0" },
  { "shard a parameter that does not exist", function(s) s["transformer.h.0.mlp.c_fc"]:shard("wieght", 1) end,
    "did you mean 'weight'" },
  { "shard an axis out of range", function(s) s["transformer.h.0.mlp.c_fc"]:shard("weight", 5) end,
    "shard: axis 5" },
  { "fork_rng with a fraction", function(s) s["transformer.h.0.attn.attn_dropout"]:fork_rng(1.5) end,
    "fork_rng: seed must be an integer from 0 to 9000000000000000, got 1.5" },
  { "sync with a number for options", function(s) s["transformer.h.0.mlp"]:sync("fwd_post", "all_gather", 2) end,
    "sync: options must be a table, got number" },
  { "sync all_gather on a fractional axis", function(s)
    s["transformer.h.0.mlp"]:sync("fwd_post", "all_gather", { axis = 1.5 })
  end, "sync: axis must be an integer from -64 to 63, got 1.5" },
  { "sync with an unknown option", function(s) s["transformer.h.0.mlp"]:sync("fwd_post", "all_reduce", { axs = 1 }) end,
    "sync: unknown option 'axs' (valid: axis)" },
  { "sync an unknown collective", function(s) s["transformer.h.0.mlp"]:sync("fwd_post", "allreduce") end,
    "sync: unknown" },
  { "sync bwd_params with a collective other than all_reduce", function(s)
    s["transformer.h.0.ln_1"]:sync("bwd_params", "all_gather", { axis = 0 })
  end, "sync: mode 'bwd_params' on 'transformer.h.0.ln_1' all-reduces parameter gradients; op must be 'all_reduce'" },
  { "sync bwd_params on a module without parameters", function(s)
    s["transformer.h.0.attn.attn_dropout"]:sync("bwd_params", "all_reduce")
  end, "sync: mode 'bwd_params' on 'transformer.h.0.attn.attn_dropout': the module has no parameters" },
  { "trace recursive and flatten at once", function(s)
    s["transformer.h.0"]:trace({ inputs = { slapo.randn({ 2, 4, 16 }) }, recursive = true, flatten = true })
  end, "trace: 'transformer.h.0': recursive and flatten exclude each other" },
  { "find with a non-boolean modules option", function(s)
    s["transformer.h.0.mlp"]:find(function(x) return slapo.F.relu(x) end, { modules = "yes" })
  end, "find: option 'modules'", setup = function(s)
    s["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 4, 16 }) } })
  end },
  { "autoshard a module that has not run", function(s) slapo.autoshard(s["transformer.h.1"]) end,
    "autoshard: 'transformer.h.1' has not run yet, so its inputs are unknown" },
  { "trace with a misspelt option", function(s) s["transformer.h.0.mlp"]:trace({ input = 1 }) end,
    "trace: unknown option 'input' (valid: inputs, leaves, flatten, recursive)" },
  { "find with a number", function(s) s:find(42) end,
    "find: expected a regular expression over leaf paths (a string) or a pattern function, got number" },
  { "checkpoint with an argument it does not take", function(s) s["transformer.h.0"]:checkpoint(3) end,
    "checkpoint:" },
  { "replace with a number", function(s) s["transformer.h.0.mlp"]:replace(5) end, "replace:" },
  { "replace with an unknown option", function(s)
    s["transformer.h.0.mlp"]:replace(slapo.nn.Identity(), { nmae = "x" })
  end, "replace: a subgraph is what find returns (an array of nodes), got a table with key 'nmae'" },
  { "replace the root", function(s) s:replace(slapo.nn.Identity()) end, "replace: cannot replace the root module" },
  { "replace a module with a wrapper of the root", function(s)
    s["transformer.h.0"]:replace(slapo.nn.Sequential({ s.mod }))
  end, "replace: cannot put an ancestor ('the root', a GPT2LMHeadModel) inside itself at 'transformer.h.0': "
    .. "the new Sequential contains it" },
  { "annotate with a number for a name", function(s) s["transformer.h.0.mlp.c_fc"]:annotate(1, 2) end, "annotate:" },
  { "index a path that does not exist", function(s) return s["transformer.h.9"] end, "schedule: no module '9'" },
  { "index with an empty path component", function(s) return s["transformer..h"] end, "schedule: no module '' under" },
  { "index with a number", function(s) return s[5] end, "schedule: index with a module path string" },
  { "shard a parameter twice", function(s) s["transformer.h.1.mlp.c_fc"]:shard("weight", 0) end,
    "shard: 'weight' of 'transformer.h.1.mlp.c_fc' is already sharded along axis 1; a parameter is sharded once" },
  { "shard a parameter named by a number", function(s) s["transformer.h.0.mlp.c_fc"]:shard(5, 0) end,
    "shard: 'transformer.h.0.mlp.c_fc' (Conv1D) has no parameter '5'" },
  { "checkpoint a module twice", function(s) s["transformer.h.0"]:checkpoint() end,
    "checkpoint: 'transformer.h.0' (GPT2Block) is already checkpointed",
    setup = function(s) s["transformer.h.0"]:checkpoint() end },
  { "cut a pipeline stage twice", function(s) s["transformer.h.0"]:cut_pipeline_stage() end,
    "cut_pipeline_stage: 'transformer.h.0' already ends a stage",
    setup = function(s) s["transformer.h.0"]:cut_pipeline_stage() end },
  { "trace with inputs that are not an array", function(s) s["transformer.h.0.mlp"]:trace({ inputs = 5 }) end,
    "trace: inputs for 'transformer.h.0.mlp' must be an array of tensors {x, ...}, got number" },
  { "trace with leaves as a string", function(s)
    s["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) }, leaves = "mlp" })
  end, "trace: leaves for 'transformer.h.0' must be an array of module paths or type names, got string" },
  { "trace with a leaf that is a number", function(s)
    s["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) }, leaves = { 5 } })
  end, "trace: leaves[1] must be a module path or type name (a string), got number" },
  { "trace with a leaf that does not exist", function(s)
    s["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) }, leaves = { "mpl" } })
  end, "trace: leaf 'mpl' is neither a path below 'transformer.h.0' nor the type of a module there" },
  { "find with an invalid regular expression", function(s) s["transformer.h.0"]:find("(") end,
    "find: '(' is not a valid regular expression",
    setup = function(s) s["transformer.h.0"]:trace({ inputs = { slapo.randn({ 1, 4, 16 }) } }) end },
  { "decompose a LayerNorm", function(s) s["transformer.h.0.ln_1"]:decompose() end,
    "decompose: 'transformer.h.0.ln_1' is a LayerNorm; decompose splits Linear and Conv1D" },
  { "sync with a number for the mode", function(s) s["transformer.h.0"]:sync(5, "all_reduce") end,
    "sync: unknown mode '5' for 'transformer.h.0' (choices: fwd_pre, fwd_post, bwd_post, bwd_params)" },
  { "fork_rng with a string seed", function(s) s["transformer.h.0.attn.attn_dropout"]:fork_rng("x") end,
    "fork_rng: the seed for 'transformer.h.0.attn.attn_dropout' must be an integer, got string" },
  { "replace_all with a number for the type", function(s) s:replace_all(5, function(m) return m end) end,
    "replace_all: type name must be a string, got number" },
  { "verify with a misspelt option", function(s) slapo.verify(s, { slapo.randint(0, 32, { 1, 4 }) }, { rtoll = 1 }) end,
    "verify: unknown option 'rtoll'" },
  { "verify with a negative tolerance", function(s) slapo.verify(s, { slapo.randint(0, 32, { 1, 4 }) }, { rtol = -1 }) end,
    "verify: option 'rtol' must be from 0 to 1e+06, got -1" },
  { "optimizer with a misspelt option", function(s) slapo.optim.adamw(s.mod, { lrr = 1 }) end,
    "optim.adamw: unknown option 'lrr' (valid: lr, weight_decay, eps, beta1, beta2, impl)" },
  { "optimizer with a negative learning rate", function(s) slapo.optim.sgd(s.mod, { lr = -1 }) end,
    "optim.sgd: option 'lr' must be from 0 to 1e+06, got -1" },
  { "optimizer with beta2 of 1", function(s) slapo.optim.adamw(s.mod, { beta2 = 1 }) end,
    "optim.adamw: option 'beta2' must be from 0 to 0.999999, got 1" },
  { "load_state_dict with a wrong shape", function(s)
    s.mod:load_state_dict({ ["lm_head.weight"] = slapo.zeros({ 2, 2 }) })
  end, "load_state_dict: 'lm_head.weight' has shape [32, 16] in the module but [2, 2] in the table" },
  { "a forward on one-dimensional ids", function(s) s.mod(slapo.randint(0, 32, { 4 })) end,
    "GPT2Model: input_ids must be token ids [batch, seq], got a tensor of shape [4]" },
  { "a forward on float ids", function(s) s.mod(slapo.randn({ 1, 4 })) end, "Embedding: indices must be integers, got Float" },
  { "cut a pipeline stage at the root", function(s) s:cut_pipeline_stage() end, "cut_pipeline_stage: the root module" },
}

describe("bad calls on a schedule", function()
  for _, case in ipairs(schedule_cases) do
    it(case[1], function()
      local sch = slapo.create_schedule(small_gpt2())
      sch["transformer.h.1.mlp.c_fc"]:shard("weight", 1)  -- a non-empty log to keep
      if case.setup then
        case.setup(sch)
      end
      local before = snapshot(sch)
      local err = pcall_err(case[2], sch)
      assert(err:find(case[3], 1, true), ("%s: expected a message containing %q, got %q"):format(case[1], case[3], err))
      assert(not err:find("stack traceback", 1, true), case[1] .. ": the message carries a traceback")
      assert_unchanged(before, sch, case[1])
    end)
  end

  it("a stale handle refuses every primitive, naming its path and what replaced its ancestor", function()
    local sch = slapo.create_schedule(small_gpt2())
    local h = sch["transformer.h.0.mlp.c_fc"]
    sch["transformer.h.0.mlp"]:replace(slapo.nn.Identity())
    local before = snapshot(sch)
    for _, call in ipairs({
      function() h:shard("weight", 1) end, function() h:sync("fwd_post", "all_reduce") end,
      function() h:checkpoint() end, function() h:annotate("x", 1) end, function() h:trace() end,
      function() h:replace(slapo.nn.Linear(16, 64)) end, function() h:fork_rng() end,
    }) do
      matches("the handle for 'transformer.h.0.mlp.c_fc' is stale: 'transformer.h.0.mlp' was replaced %(it is now "
        .. "Identity, which has no 'c_fc'%)", pcall_err(call))
    end
    assert_unchanged(before, sch, "stale handle")
    -- a fresh handle to a live module still works
    sch["transformer.h.0.attn.c_attn"]:shard("weight", 1, { groups = 3 })
  end)
end)

describe("bad calls elsewhere", function()
  it("name the function and the numbers", function()
    local model = small_gpt2()
    matches("Embedding: token id 40 is out of range for a table of 32 rows %(ids from 0 to 31%)",
      pcall_err(model, slapo.tensor({ { 1, 40 } }, { dtype = "int64" })))
    matches("Embedding: token id %-1 is out of range", pcall_err(model, slapo.tensor({ { 1, -1 } }, { dtype = "int64" })))
    matches("GPT2Model: a sequence of 20 tokens is longer than n_positions 16",
      pcall_err(model, slapo.randint(0, 32, { 1, 20 })))
    matches("build: options must be a table, got number", pcall_err(slapo.build, slapo.create_schedule(model), 5))
    matches("build: unknown option 'sead'", pcall_err(slapo.build, slapo.create_schedule(model), { sead = 1 }))
    matches("save: max_shard_size must be a byte count >= 0 %(0: one file%), got %-1",
      pcall_err(slapo.save, model, os.tmpname() .. ".d", { max_shard_size = -1 }))
    matches("save: cannot create the directory '/proc/no/such/dir'", pcall_err(slapo.save, model, "/proc/no/such/dir"))
    matches("create_schedule: bad argument #1: module expected, got nil", pcall_err(slapo.create_schedule, nil))
    matches("create_schedule: unknown option 'grop' %(valid: group%)", pcall_err(slapo.create_schedule, model, { grop = 1 }))
    matches("nn.Linear: out_features must be a positive integer, got 0", pcall_err(slapo.nn.Linear, 4, 0))
    matches("nn.Dropout: p must be in %[0, 1%], got 2", pcall_err(slapo.nn.Dropout, 2))
    matches("zeros: unknown dtype 'float31' %(choices: float32", pcall_err(slapo.zeros, { 2 }, { dtype = "float31" }))
    matches("from_pretrained: '/nonexistent/x' has no config.json", pcall_err(slapo.models.from_pretrained, "/nonexistent/x"))
    matches("LlamaModel: input_ids must be token ids %[batch, seq%]", pcall_err(slapo.models.llama({ hidden_size = 16,
      num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 32, vocab_size = 32 }), slapo.randint(0, 32, { 4 })))
    matches("verify: bad argument #1: schedule expected, got nil", pcall_err(slapo.verify, nil, {}))
    local data = { vocab = 32, batch = 2, seq = 8 }
    matches("train: steps must be an integer >= 1, got %-1", pcall_err(slapo.train, { model = model, data = data, steps = -1 }))
    matches("train: grad_accum must be an integer >= 1, got 0",
      pcall_err(slapo.train, { model = model, data = data, grad_accum = 0 }))
    matches("train: lr must be a finite number >= 0, got %-0.1", pcall_err(slapo.train, { model = model, data = data, lr = -0.1 }))
  end)

  it("a module cannot be put inside itself", function()
    local inner = slapo.nn.Sequential({ slapo.nn.Linear(2, 2) })
    local outer = slapo.nn.Sequential({ inner })
    local sch = slapo.create_schedule(outer)
    matches("replace: cannot put an ancestor %('the root', a Sequential%) inside itself at '0.0': the new Sequential contains it",
      pcall_err(function() sch["0.0"]:replace(slapo.nn.Sequential({ outer })) end))
  end)
end)
