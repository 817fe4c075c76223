-- expect: BertLMHeadModel: argument 1 (input_ids) must be a tensor, got nothing
-- Calling a zoo model without token ids.
local model = slapo.models.bert({ hidden_size = 16, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 32 })
require("slapo.must_fail").refuses(model, function() model() end)
