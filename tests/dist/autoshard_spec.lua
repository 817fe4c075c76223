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
  },
}

describe("slapo.autoshard (intra-op pass, 1-D mesh)", function()
  for _, name in ipairs({ "gpt2", "bert", "llama" }) do
    local f = families[name]
    it(name .. ": finds Megatron's layout on a 4096-wide layer, and its schedule verifies on 2 ranks", function()
      local wide = slapo.models[name](f.wide, { init = false })
      slapo.no_grad(function() wide(slapo.randint(0, 64, { 1, 16 })) end)  -- the layer's inputs, for the trace
      local plan = slapo.autoshard(slapo.create_schedule(wide)[f.layers .. ".0"], { ranks = world, batch = 8,
        seq = 512 })
      wide = nil
      collectgarbage()
      for path, style in pairs(f.expect) do
        eq(style, plan.strategy[path], path)
      end
      assert(plan.step_s < plan.replicated_s, "sharded is predicted faster than replicated")
      slapo.manual_seed(5)
      local sch = slapo.create_schedule(slapo.models[name](f.small))
      local ids = slapo.randint(0, 64, { 2, 8 })
      slapo.dist.broadcast(ids, 0)
      local report = slapo.verify(sch, { ids }, {}, function(s)
        for _, layer in ipairs(s[f.layers]:children()) do
          plan:apply(layer)
        end
      end)
      assert(report.gradients > 10, "compared " .. report.gradients .. " gradients")
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
