-- The static-graph primitives on one BERT layer: trace the self-attention, put the fused
-- memory-efficient attention kernel in place of its core, fuse the MLP's bias + GELU into one
-- kernel and the output's bias + dropout + residual + LayerNorm into another, and check the result
-- against the unscheduled model, outputs and gradients, with dropout on (the same masks).
--   slapo-lua run examples/fuse_bert.lua
local subgraph = require("slapo.subgraph")
local cfg = { hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 256,
  vocab_size = 512, max_position_embeddings = 64, hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0 }
slapo.manual_seed(0)
local model = slapo.models.bert(cfg)
local ids = slapo.randint(0, cfg.vocab_size, { 2, 32 })

local report = slapo.verify(slapo.create_schedule(model), { ids }, { train = true }, function(sch)
  local attention = sch["bert.encoder.layer.0.attention.self"]
  attention:trace({ inputs = { slapo.randn({ 2, 32, cfg.hidden_size }) }, flatten = true })
  local graph = attention:graph()
  -- the core: from q @ k^T to probs @ v; its inputs in order of first use: q, k^T, v
  local core = subgraph.between(graph, subgraph.first(graph, "aten::matmul"), subgraph.last(graph, "aten::matmul"))
  print(("attention core: %d nodes (%s ... %s)"):format(#core, core[1].op, core[#core].op))
  attention:replace(function(q, kt, v) return slapo.kernels.attention(q, kt:transpose(-1, -2), v) end, core)

  local mlp = sch["bert.encoder.layer.0.intermediate"]
  mlp["dense"]:decompose()
  mlp:trace({ inputs = { slapo.randn({ 2, 32, cfg.hidden_size }) }, flatten = true })
  local found = mlp:find(function(x, bias) return slapo.F.gelu(x + bias) end)
  local fused = mlp:fuse(found[1], { compiler = "kernels", name = "BiasGeLU" })
  print("fused: " .. fused.path)

  -- the output's tail: dense's bias -> Dropout -> + residual -> LayerNorm, one kernel; the
  -- kernel reads the Dropout's p and train/eval state when it runs
  local output = sch["bert.encoder.layer.0.output"]
  output["dense"]:decompose()
  output:trace({ inputs = { slapo.randn({ 2, 32, cfg.intermediate_size }), slapo.randn({ 2, 32, cfg.hidden_size }) },
    flatten = true })
  print(("output tail: %d fused"):format(output:fuse(nil, { compiler = "kernels" })))
  print(sch["bert.encoder.layer.0"])
  print(sch:log())
end)
print(("verify: outputs match (max difference %.2g), %d gradients match (max difference %.2g)"):format(
  report.max_output_diff, report.gradients, report.max_grad_diff))
