-- Whole-graph fusion on LLaMA: trace each decoder layer's MLP and RMSNorms flat and let
-- fuse(nil, {compiler = "kernels"}) rewrite what it recognises (silu(gate) * up -> swiglu,
-- LlamaRMSNorm -> rms_norm), then check the result against the unscheduled model.
--   slapo-lua run examples/fuse_llama.lua
local cfg = { hidden_size = 64, intermediate_size = 172, num_hidden_layers = 2, num_attention_heads = 4,
  num_key_value_heads = 2, vocab_size = 512, max_position_embeddings = 64 }
slapo.manual_seed(0)
local model = slapo.models.llama(cfg)
local ids = slapo.randint(0, cfg.vocab_size, { 2, 32 })
local hidden = { 2, 32, cfg.hidden_size }

local report = slapo.verify(slapo.create_schedule(model), { ids }, {}, function(sch)
  for _, layer in ipairs(sch["model.layers"]:children()) do
    for _, path in ipairs({ "mlp", "input_layernorm", "post_attention_layernorm" }) do
      local sub = layer[path]
      sub:trace({ inputs = { slapo.randn(hidden) }, flatten = true })
      local fused = sub:fuse(nil, { compiler = "kernels" })
      local ops = {}
      for _, node in ipairs(sub:graph().nodes) do
        table.insert(ops, node.op)
      end
      print(("%-40s %d fused: %s"):format(sub.path, fused, table.concat(ops, " ")))
    end
  end
end)
print(("verify: outputs match (max difference %.2g), %d gradients match (max difference %.2g)"):format(
  report.max_output_diff, report.gradients, report.max_grad_diff))
