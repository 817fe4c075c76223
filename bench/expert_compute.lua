-- A mixture of experts' expert compute, three ways on one device (issue 56): each expert once on
-- the rows routed to it ("gathered"), each projection of every expert in one grouped matmul
-- ("grouped", LibTorch's _grouped_mm: LibTorch 2.9 and later; auto takes it for Hopper GPUs, CUDA rows in bf16), and every expert on
-- every token ("dense", the same outputs at E/k times the work). A Mixtral-shaped model (8 experts,
-- top-2, 2 layers, 1024 wide) in bf16 weights on CUDA (float32 on the CPU), forward and backward of
-- one batch of 4 x 512 tokens, median of 3 after one warm-up; the loss beside dense's.
--   slapo-lua run bench/expert_compute.lua [--device cuda]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local device = "cpu"
for i, a in ipairs(arg) do
  if a == "--device" then device = arg[i + 1] end
end
local gpu = device ~= "cpu"
if gpu then assert(slapo.cuda.is_available(), "bench/expert_compute.lua --device " .. device .. ": no usable GPU") end
local config = { hidden_size = gpu and 1024 or 256, intermediate_size = gpu and 2048 or 512, num_hidden_layers = 2,
  num_attention_heads = 8, num_key_value_heads = 4, num_local_experts = 8, num_experts_per_tok = 2,
  vocab_size = 4096, max_position_embeddings = 512 }
local rows, seq = 4, gpu and 512 or 128

local function model_in(mode)
  slapo.manual_seed(0)
  local m = slapo.models.mixtral(config)
  if gpu then m = m:to(device):to("bfloat16") end
  slapo.models.expert_compute(m, mode)
  return m
end

slapo.manual_seed(1)
local ids = slapo.randint(0, config.vocab_size, { rows, seq }):to(device)
local function step(m)
  local loss = m(ids, { labels = ids })
  loss:backward()
  if gpu then slapo.cuda.synchronize() end
  return loss:item()
end

local results = {}
for _, mode in ipairs({ "dense", "gathered", "grouped" }) do
  io.stderr:write(("measuring %s on %s ...\n"):format(mode, device))
  local ok, m = pcall(model_in, mode)
  if not ok then
    results[#results + 1] = { mode = mode, skipped = tostring(m):gsub("\n.*", "") }
  else
    local ran, err = pcall(step, m)
    if not ran then
      results[#results + 1] = { mode = mode, skipped = tostring(err):gsub("\n.*", "") }
    else
      local loss = step(m)
      results[#results + 1] = { mode = mode, loss = loss, s = timing.time(function() step(m) end, 0, 3) }
    end
  end
end

print(("expert compute on %s, %s, %s; Mixtral %d wide, %d experts top-%d, %d layers, %d x %d tokens, forward and "
  .. "backward, median of 3"):format(device, gpu and "bf16 weights" or "float32", os.date("!%Y-%m-%d"),
  config.hidden_size, config.num_local_experts, config.num_experts_per_tok, config.num_hidden_layers, rows, seq))
print("| mode | step | x dense | loss | loss - dense's |")
print("|---|---|---|---|---|")
local dense = results[1]
for _, r in ipairs(results) do
  if r.skipped then
    print(("| %s | not run: %s | | | |"):format(r.mode, r.skipped))
  else
    local base = dense.s and dense or r  -- dense not run: ratios to itself
    print(("| %s | %.4f s | %.2f | %.5f | %.2g |"):format(r.mode, r.s, r.s / base.s, r.loss, r.loss - base.loss))
  end
end
