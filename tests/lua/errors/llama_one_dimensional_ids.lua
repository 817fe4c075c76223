-- expect: LlamaModel: input_ids must be token ids [batch, seq], got a tensor of shape [4]
-- LLaMA on one-dimensional ids: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = slapo.models.llama({ hidden_size = 16, num_hidden_layers = 1, num_attention_heads = 2,
  intermediate_size = 32, vocab_size = 32 })
must_fail.refuses(model, function() model(slapo.randint(0, 32, { 4 })) end)
