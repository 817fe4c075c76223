-- What the docs' BERT snippets continue (tests/docs/doc_blocks.lua): a small BERT, its schedule,
-- token ids and hidden states x for a layer's trace, as globals the snippet may use or make again.
slapo.manual_seed(0)
model = slapo.models.bert({ hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 4,
  intermediate_size = 128, vocab_size = 96, hidden_dropout_prob = 0, attention_probs_dropout_prob = 0 })
sch = slapo.create_schedule(model)
ids = slapo.randint(0, 96, { 2, 16 })
x = slapo.randn({ 2, 16, 64 })
subgraph = require("slapo.subgraph")
