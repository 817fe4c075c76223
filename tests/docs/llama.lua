-- What the docs' LLaMA snippets continue (tests/docs/doc_blocks.lua): a small LLaMA and its schedule.
slapo.manual_seed(0)
model = slapo.models.llama({ hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 4,
  intermediate_size = 128, vocab_size = 96 })
sch = slapo.create_schedule(model)
ids = slapo.randint(0, 96, { 2, 16 })
