-- What docs/distributed.md's data-parallel snippet continues (tests/docs/doc_blocks.lua): a small
-- GPT-2, a layout of every rank as data-parallel, an optimizer and one batch's loss.
slapo.manual_seed(0)
model = slapo.models.gpt2({ n_embd = 64, n_layer = 2, n_head = 4, vocab_size = 96, n_positions = 32 })
layout = require("slapo.parallel").layout({ tp = 1 })
opt = slapo.optim.adamw(model, { lr = 1e-3 })
local ids = slapo.randint(0, 96, { 2, 16 })
loss = model(ids, { labels = ids })
