-- Sequence parallelism from the intra-op pass (slapo.autoshard{sequence = true}): each layer's
-- tokens are split over the tensor-parallel ranks between its projections. The pass must find
-- Megatron's sequence-parallel attention (the tokens gathered once before q, k and v, the output
-- projection's partial sums reduce-scattered over the tokens, the norms' gradients summed), and the
-- schedule it writes must verify, outputs and every gradient, on a small model of the family.
local world = slapo.dist.world_size()

local families = {
  gpt2 = {
    wide = { n_embd = 1024, n_layer = 1, n_head = 16, vocab_size = 64, n_positions = 16 },
    small = { n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16, resid_pdrop = 0, embd_pdrop = 0,
      attn_pdrop = 0 },
    layers = "transformer.h",
    expect = { ["attn.c_attn"] = "column_seq", ["attn.c_proj"] = "row_seq" },
    norms = { "ln_1", "ln_2" },
  },
  bert = {
    wide = { hidden_size = 1024, num_hidden_layers = 1, num_attention_heads = 16, intermediate_size = 4096,
      vocab_size = 64, max_position_embeddings = 16 },
    small = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64, vocab_size = 64,
      max_position_embeddings = 16, hidden_dropout_prob = 0, attention_probs_dropout_prob = 0 },
    layers = "bert.encoder.layer",
    expect = { ["attention.self.query"] = "column_seq", ["attention.self.key"] = "column_seq",
      ["attention.self.value"] = "column_seq", ["attention.output.dense"] = "row_seq" },
    gathers = { "attention.self" },
    norms = { "attention.output.LayerNorm", "output.LayerNorm" },
  },
  llama = {
    wide = { hidden_size = 1024, num_hidden_layers = 1, num_attention_heads = 16, num_key_value_heads = 4,
      intermediate_size = 2816, vocab_size = 64 },
    -- key/value heads that divide over the ranks (the plan comes from the wide layer's four)
    small = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = world,
      intermediate_size = 64, vocab_size = 64 },
    layers = "model.layers",
    expect = { ["self_attn.q_proj"] = "column_seq", ["self_attn.k_proj"] = "column_seq",
      ["self_attn.v_proj"] = "column_seq", ["self_attn.o_proj"] = "row_seq" },
    gathers = { "self_attn" },
    norms = { "input_layernorm", "post_attention_layernorm" },
  },
}

local function escape(s) return (s:gsub("[%.%-%[%]%(%)]", "%%%0")) end

local function verify_on_small(f, name, plan)
  slapo.manual_seed(5)
  local sch = slapo.create_schedule(slapo.models[name](f.small))
  local ids = slapo.randint(0, 64, { 2, 4 * world })
  slapo.dist.broadcast(ids, 0)
  local report = slapo.verify(sch, { ids }, {}, function(s)
    for _, layer in ipairs(s[f.layers]:children()) do
      plan:apply(layer)
    end
  end)
  eq(report.params, report.gradients, "every parameter's gradient compared")
end

describe("slapo.autoshard{sequence = true} (Megatron's sequence parallelism)", function()
  for _, name in ipairs({ "gpt2", "bert", "llama" }) do
    local f = families[name]
    it(name .. ": gathers the tokens before attention, reduce-scatters after it, and verifies on "
      .. world .. " ranks", function()
      local wide = slapo.models[name](f.wide, { init = false })
      slapo.no_grad(function() wide(slapo.randint(0, 64, { 1, 13 })) end)
      local layer = slapo.create_schedule(wide)[f.layers .. ".0"]
      local plan = slapo.autoshard(layer, { ranks = world, batch = 8, seq = 1024, sequence = true })
      local whole = slapo.autoshard(layer, { ranks = world, batch = 8, seq = 1024 })
      wide, layer = nil, nil
      collectgarbage()
      eq(true, plan.sequence)
      for path, style in pairs(f.expect) do
        eq(style, plan.strategy[path], path)
      end
      -- the layer takes whole tensors and hands whole ones back; inside, its tokens are split
      matches('^return function%(sch%)\n  sch:sync%("fwd_pre", "scatter", { axis = 1 }%)\n',
        plan.source:gsub("^%-%-[^\n]*\n", ""):gsub("^%-%-[^\n]*\n", ""))
      matches('\n  sch:sync%("fwd_post", "all_gather", { axis = 1 }%)\nend\n$', plan.source)
      for _, parent in ipairs(f.gathers or {}) do  -- once for the projections that share the input
        matches('\n  sch%["' .. escape(parent) .. '"%]:sync%("fwd_pre", "all_gather", { axis = 1, grad = "reduce_scatter" }%)\n',
          plan.source)
      end
      for _, norm in ipairs(f.norms) do  -- the norms see this rank's tokens: their gradients summed
        matches('\n  sch%["' .. escape(norm) .. '"%]:sync%("bwd_params", "all_reduce"%)\n', plan.source)
      end
      -- the same all-reduced volume as Megatron's, in half-sized pieces: less memory, a little more time
      assert(plan.memory_mib < whole.memory_mib, plan.memory_mib .. " vs " .. whole.memory_mib)
      verify_on_small(f, name, plan)
    end)
  end

  it("under a memory budget shards the MLP too (gathered, reduce-scattered), and that verifies", function()
    local f = families.gpt2
    local wide = slapo.models.gpt2(f.wide, { init = false })
    slapo.no_grad(function() wide(slapo.randint(0, 64, { 1, 13 })) end)
    local layer = slapo.create_schedule(wide)["transformer.h.0"]
    local free = slapo.autoshard(layer, { ranks = world, batch = 8, seq = 1024, sequence = true })
    local tight = slapo.autoshard(layer, { ranks = world, batch = 8, seq = 1024, sequence = true,
      memory_mib = free.memory_mib * 0.97 })
    assert(tight.memory_mib <= free.memory_mib * 0.97, tight.memory_mib)
    eq("column_seq", tight.strategy["mlp.c_fc"])
    eq("row_seq", tight.strategy["mlp.c_proj"])
    verify_on_small(f, "gpt2", tight)
  end)

  -- Slapo's tests/test_autoshard.py: p = 8, batch 8, sequence 512, width 1024, its forward-volume
  -- objective (objective = "volume"); its MLP and BERT-large's layer
  it("objective = \"volume\" gives Slapo's test_autoshard numbers: MLP bs*seq*h/p + 1, BERT layer 3*bs*seq*h/p + 4",
    function()
    local p, bs, seq, h = 8, 8, 512, 1024
    local nn = slapo.nn
    local mlp = nn.Module({ type = "MLP", children = { fc1 = nn.Linear(h, 4 * h), fc2 = nn.Linear(4 * h, h) },
      forward = function(self, x) return self.fc2(slapo.F.gelu(self.fc1(x))) end })
    local plan = slapo.autoshard(slapo.create_schedule(mlp),
      { ranks = p, batch = bs, seq = seq, sequence = true, objective = "volume", inputs = { slapo.randn({ 1, 13, h }) } })
    eq(bs * seq * h / p + 1, plan.volume)  -- Slapo: fc1 SRxRR->SR, fc2 SRxRR->SR->RR
    eq("token_parallel", plan.strategy.fc1)
    eq("token_parallel", plan.strategy.fc2)
    local bert = slapo.models.bert({ hidden_size = h, num_hidden_layers = 1, num_attention_heads = 16,
      intermediate_size = 4 * h, vocab_size = 64, max_position_embeddings = 16 }, { init = false })
    slapo.no_grad(function() bert(slapo.randint(0, 64, { 1, 13 })) end)
    local layer = slapo.create_schedule(bert)["bert.encoder.layer.0"]
    local attn = slapo.autoshard(layer, { ranks = p, batch = bs, seq = seq, sequence = true, objective = "volume" })
    eq(3 * (bs * seq * h / p) + 4, attn.volume)
    -- each rank's queries against every token's keys and values, gathered after their projections
    eq("token_parallel", attn.strategy["attention.self.query"])
    eq("token_gather", attn.strategy["attention.self.key"])
    eq("token_gather", attn.strategy["attention.self.value"])
    -- the time objective keeps Megatron's attention: the same volume in time is cheaper split by heads
    local timed = slapo.autoshard(layer, { ranks = p, batch = bs, seq = seq, sequence = true })
    eq("column_seq", timed.strategy["attention.self.key"])
    assert(timed.volume > attn.volume, timed.volume .. " vs " .. attn.volume)
    matches('autoshard: \'bert.encoder.layer.0\': option \'objective\' must be one of "time", "volume", got "bytes"',
      pcall_err(slapo.autoshard, layer, { ranks = p, objective = "bytes" }))
  end)

  it("token-parallel attention (keys and values gathered over the tokens) verifies on " .. world .. " ranks",
    function()
    local f = families.bert
    local wide = slapo.models.bert(f.wide, { init = false })
    slapo.no_grad(function() wide(slapo.randint(0, 64, { 1, 13 })) end)
    local layer = slapo.create_schedule(wide)[f.layers .. ".0"]
    local plan = slapo.autoshard(layer, { ranks = world, batch = 8, seq = 1024, sequence = true, objective = "volume" })
    eq("token_gather", plan.strategy["attention.self.key"])
    matches('\n  sch%["attention%.self%.value"%]:sync%("bwd_params", "all_reduce"%):sync%("fwd_post", "all_gather", '
      .. '{ axis = 1, grad = "reduce_scatter" }%)', plan.source)
    verify_on_small(f, "bert", plan)
  end)

  it("refuses sequence parallelism on a module whose input is one token, by name", function()
    local nn = slapo.nn
    local m = nn.Module({ type = "Flat", children = { fc = nn.Linear(8, 8) },
      forward = function(self, x) return self.fc(x) end })
    matches("autoshard: the root module: sequence parallelism splits the first input along its tokens, but it has none "
      .. "to split %(it takes a floating %[batch, sequence, hidden%] input of 2 tokens or more; sequence = false keeps "
      .. "tensors whole%)",
      pcall_err(slapo.autoshard, slapo.create_schedule(m), { inputs = { slapo.randn({ 1, 8 }) }, sequence = true }))
  end)
end)
