-- A LLaMA-3-shaped model learns State of the Union addresses through LLaMA-3's own tokenizer:
-- the corpus is tokenized once into a token file, and slapo.train reads it mapped, each step's rows
-- a function of the step (so a killed run resumes on the very batches it would have seen).
--   build/slapo-lua tokenize --tokenizer data/llama3-tokenizer --out sotu.tokens data/sotu/*.txt
--   build/slapo-lua run examples/llama3_sotu.lua --tokens sotu.tokens [--steps 100]
-- With a real checkpoint (a Hugging Face LLaMA-3 directory holding tokenizer.json), tokenize with
-- its tokenizer and fine-tune it instead of the small model:
--   build/slapo-lua run examples/llama3_sotu.lua --tokens sotu.tokens --checkpoint path/to/Llama-3.2-1B
local train = require("_train")
local opts = train.options({ tokens = "sotu.tokens", checkpoint = "", steps = 100, layers = 2, hidden = 128,
  heads = 4, seq = 64, batch = 8, lr = 3e-3, warmup = 10, seed = 0, log_every = 10, metrics = "llama3_sotu.jsonl",
  checkpoint_dir = "", checkpoint_every = 50 })

local util = require("slapo.util")
if not util.read_file(opts.tokens) then
  -- the command as this program was invoked (build/slapo-lua in a checkout)
  error(("no token file '%s': make it with\n  %s tokenize --tokenizer data/llama3-tokenizer --out %s "
    .. "data/sotu/*.txt"):format(opts.tokens, slapo._program_name(), opts.tokens), 0)
end
local tokens = slapo.token_file(opts.tokens)
train.log(("corpus: %s tokens in %d documents (vocabulary %s)"):format(util.with_commas(tokens.tokens),
  tokens.documents, util.with_commas(tokens.vocab_size)))

slapo.manual_seed(opts.seed)
local model = opts.checkpoint ~= "" and slapo.models.from_pretrained(opts.checkpoint)
  or slapo.models.llama({ vocab_size = tokens.vocab_size, hidden_size = opts.hidden, num_hidden_layers = opts.layers,
    num_attention_heads = opts.heads, num_key_value_heads = math.max(1, math.floor(opts.heads / 2)),
    intermediate_size = math.floor(opts.hidden * 8 / 3), max_position_embeddings = opts.seq, rope_theta = 500000,
    tie_word_embeddings = true })
local result = slapo.train({ model = model, data = { tokens = tokens, batch = opts.batch, seq = opts.seq, seed = 1 },
  steps = opts.steps, lr = opts.lr, warmup = opts.warmup, clip = 1.0, metrics = opts.metrics,
  log_every = opts.log_every, checkpoint_dir = opts.checkpoint_dir ~= "" and opts.checkpoint_dir or false,
  checkpoint_every = opts.checkpoint_every })
local first = result.losses[1] and 1 or math.min(result.first_step, opts.steps)
train.log(("loss %.3f -> %.3f over steps %d..%d (this run trained from step %d); metrics in %s"):format(
  result.losses[first] or 0 / 0, result.final_loss or 0 / 0, first, opts.steps, result.first_step, opts.metrics))
