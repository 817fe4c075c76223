-- Timing helpers shared by the benchmarks: warm-up, then the median of repeated runs.
local M = {}

function M.median(values)
  local sorted = {}
  for i, v in ipairs(values) do
    sorted[i] = v
  end
  table.sort(sorted)
  local n = #sorted
  return n % 2 == 1 and sorted[(n + 1) / 2] or (sorted[n / 2] + sorted[n / 2 + 1]) / 2
end

--- Runs fn() `warmup` times, then `repeats` times; returns the median seconds.
function M.time(fn, warmup, repeats)
  for _ = 1, warmup do
    fn()
  end
  local samples = {}
  for i = 1, repeats do
    local start = slapo.clock()
    fn()
    samples[i] = slapo.clock() - start
  end
  return M.median(samples)
end

--- The peak resident memory of this process so far, in MiB (VmHWM).
function M.peak_memory_mib()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmHWM:%s+(%d+)")
    if kb then
      return tonumber(kb) / 1024
    end
  end
end

--- The configurations the benchmarks share (BERT-base / GPT-2-small widths, fewer layers so a
--- CPU step takes about a second).
M.configs = {
  bert = { hidden_size = 768, num_hidden_layers = 4, num_attention_heads = 12, intermediate_size = 3072,
    vocab_size = 30522, hidden_dropout_prob = 0.0, attention_probs_dropout_prob = 0.0 },
  gpt2 = { n_embd = 768, n_layer = 4, n_head = 12, vocab_size = 50257, resid_pdrop = 0.0, embd_pdrop = 0.0,
    attn_pdrop = 0.0 },
}

return M
