-- One training step of a zoo model on the GPU, timed, for bench/gpu/run (hf_step.py's twin).
--   slapo-lua run bench/gpu/slapo_step.lua MODEL BATCH SEQ PRECISION [FUSE] [ATTN]
--   MODEL: bert-large | gpt2 | tinyllama; PRECISION: fp32 | bf16 (weights) | bf16-autocast;
--   FUSE: 0 | 1 (the reference schedule's kernels that win on this device) | 2 (all of them);
--   ATTN: sdpa (default: scaled_dot_product_attention with its dropout inside, as hf_step.py's
--   default) | eager (matmul, softmax, Dropout module, matmul) | auto (the zoo's default: SDPA where
--   the attention dropout drops nothing)
-- Prints "SECONDS PEAK_GIB": the mean of 10 steps after 3, and the peak of tensor memory.
local name, batch, seq, precision = arg[1], tonumber(arg[2]), tonumber(arg[3]), arg[4]
local fuse = tonumber(arg[5] or 0)
local attn = arg[6] or "sdpa"
-- the zoo's BERT trains with the causal-LM loss, as hf_step.py's BertLMHeadModel (is_decoder);
-- the configurations are hf_step.py's
local presets = {
  ["bert-large"] = { "bert", { hidden_size = 1024, num_hidden_layers = 24, num_attention_heads = 16,
    intermediate_size = 4096, is_decoder = true } },
  gpt2 = { "gpt2", {} },
  tinyllama = { "llama", { hidden_size = 2048, intermediate_size = 5632, num_hidden_layers = 22,
    num_attention_heads = 32, num_key_value_heads = 4, vocab_size = 32000, max_position_embeddings = 2048,
    rms_norm_eps = 1e-5 } },
}
local preset = assert(presets[name], "slapo_step.lua: unknown model " .. tostring(name))
assert(({ fp32 = true, bf16 = true, ["bf16-autocast"] = true })[precision], "precision: fp32 | bf16 | bf16-autocast")
assert(({ sdpa = true, eager = true, auto = true })[attn], "attn: sdpa | eager | auto")
if attn ~= "auto" then preset[2].attn_implementation = attn end

slapo.manual_seed(0)
local model = slapo.models[preset[1]](preset[2])
if fuse > 0 then
  local sch = slapo.create_schedule(model)
  for _, note in ipairs(require("slapo.schedules." .. preset[1]).schedule(sch,
      { fuse = fuse == 2 and "all" or true, device = "cuda" })) do
    io.stderr:write(note, "\n")
  end
  model = slapo.build(sch)
end
model:to("cuda")
if precision == "bf16" then model:to("bfloat16") end
model:train()
local optimizer = slapo.optim.adamw(model, { lr = 1e-4, weight_decay = 0.0 })
local vocab = model:parameters()[1]:size(0)
local ids = slapo.randint(0, vocab, { batch, seq }):to("cuda")

local function step()
  optimizer:zero_grad()
  local loss
  if precision == "bf16-autocast" then
    loss = slapo.autocast("bf16", function() return model(ids, { labels = ids }) end)
  else
    loss = model(ids, { labels = ids })
  end
  loss:backward()
  optimizer:step()
end

for _ = 1, 3 do step() end
slapo.cuda.synchronize()
local peak
local start = slapo.clock()
peak = slapo.peak_tensor_mib(function()
  for _ = 1, 10 do step() end
  slapo.cuda.synchronize()
end)
print((slapo.clock() - start) / 10, peak / 1024)
