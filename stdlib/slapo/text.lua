--- Real text for training: files tokenised with GPT-2's BPE (or a family's own tokenizer) and
--- packed into fixed-length sequences, documents separated by the end-of-text token.
---
--- Example usage:
---   local data = require("slapo.text").dataset{ dir = "data/sotu", last = 20, seq = 64, batch = 8 }
---   slapo.train{ model = model, data = data.batches, steps = 300 }
---   print(data.tokens, data.files)   -- how much text it holds
local M = {}

local function data_dir()
  return os.getenv("SLAPO_DATA_DIR") or (slapo._source_dir and slapo._source_dir() .. "/data") or "data"
end
M.data_dir = data_dir

--- opts: dir (default data/sotu), last (use the last N files, by name: the latest addresses),
--- seq, batch, bpe (default data/gpt2-bpe), or tokenizer (a slapo.tokenizer: its ids, its eos_id
--- between documents when it has one). Returns {batches = fn(step, micro), tokens, files}.
function M.dataset(opts)
  local dir = opts.dir or (data_dir() .. "/sotu")
  local files = {}
  local listing = io.popen("ls " .. dir .. "/*.txt 2>/dev/null")
  for path in listing:lines() do
    table.insert(files, path)
  end
  listing:close()
  if #files == 0 then
    error(("text.dataset: no .txt files in '%s' (scripts/fetch-data downloads the corpus)"):format(dir), 2)
  end
  table.sort(files)
  if opts.last and opts.last < #files then
    files = { unpack(files, #files - opts.last + 1) }
  end
  -- a tokenizer of the model's family (slapo.tokenizer), else GPT-2's byte-level BPE
  local bpe = not opts.tokenizer and require("slapo.bpe").load(opts.bpe or (data_dir() .. "/gpt2-bpe"))
  local encoder = opts.tokenizer or bpe
  local eot = bpe and bpe.encoder["<|endoftext|>"] or opts.tokenizer.eos_id  -- none: addresses run together
  local stream = {}
  for _, path in ipairs(files) do
    local f = assert(io.open(path, "r"))
    for _, id in ipairs(encoder:encode(f:read("*a"))) do
      stream[#stream + 1] = id
    end
    f:close()
    stream[#stream + 1] = eot
  end
  local tokens = slapo.tensor(stream, { dtype = "int64" })
  local window = opts.seq * opts.batch
  local windows = math.floor(#stream / window)
  if windows < 1 then
    error(("text.dataset: %d tokens cannot fill one batch of %d x %d"):format(#stream, opts.batch, opts.seq), 2)
  end
  return {
    tokens = #stream,
    files = #files,
    bpe = bpe,
    -- step s, micro-batch m: consecutive windows, wrapping around the stream
    batches = function(step, micro)
      local index = ((step - 1) * (opts.grad_accum or 1) + (micro - 1)) % windows
      return tokens:narrow(0, index * window, window):view({ opts.batch, opts.seq })
    end,
  }
end

return M
