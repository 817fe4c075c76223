-- What the docs' GPT-2 snippets continue (tests/docs/doc_blocks.lua): a small GPT-2, its schedule
-- and a batch of token ids, as globals the snippet may use or make again.
slapo.manual_seed(0)
model = slapo.models.gpt2({ n_embd = 64, n_layer = 8, n_head = 4, vocab_size = 96, n_positions = 32 })
sch = slapo.create_schedule(model)
ids = slapo.randint(0, 96, { 8, 16 })
