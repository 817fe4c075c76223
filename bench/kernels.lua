-- Fused kernels vs the unfused ATen ops they replace: forward + backward time, one run, the two
-- alternating round by round, and the peak of tensor memory each step holds.
--   slapo-lua run bench/kernels.lua                   # the CPU kernels
--   slapo-lua run bench/kernels.lua --device cuda     # the CUDA kernels (a CUDA build on a GPU)
--   ... --record    also writes the ratios into slapo.kernel_ratios (stdlib/slapo/kernel_ratios.lua),
--                   from which the reference schedules' fuse = true picks the kernels that win here
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local device, record = "cpu", false
for i, a in ipairs(arg) do
  if a == "--device" then device = arg[i + 1] end
  if a == "--record" then record = true end
end
local on_gpu = device:match("^cuda") ~= nil
if on_gpu then
  assert(slapo.cuda.is_available(), "bench/kernels.lua --device " .. device .. ": no CUDA in this build or machine")
end
slapo.manual_seed(0)

local function step(fn, inputs)
  return function()
    local leaves = {}
    for i, t in ipairs(inputs) do
      leaves[i] = t:detach():requires_grad(true)
    end
    fn(unpack(leaves)):sum():backward()
    if on_gpu then
      slapo.cuda.synchronize()  -- time the kernels, not their launch
    end
  end
end

-- every input starts on the CPU (same seed) and moves to the device
local randn = function(shape) return slapo.randn(shape):to(device) end

local x, b = randn({ 64, 512, 768 }), randn({ 768 })
local g, u = randn({ 64, 512, 688 }), randn({ 64, 512, 688 })
local w = randn({ 768 })
local cases = {
  { "bias_gelu (tanh)", kernel = "bias_gelu", { x, b }, function(x, b) return slapo.kernels.bias_gelu(x, b, { approximate = "tanh" }) end,
    function(x, b) return slapo.F.gelu(x + b, "tanh") end },
  { "rms_norm", kernel = "rms_norm", { x, w }, function(x, w) return slapo.kernels.rms_norm(x, w, 1e-6) end,
    function(x, w) return w * (x * (1 / ((x * x):mean(2, true) + 1e-6):sqrt())) end },
  { "swiglu", kernel = "swiglu", { g, u }, function(g, u) return slapo.kernels.swiglu(g, u) end,
    function(g, u) return slapo.F.silu(g) * u end },
}
local s = randn({ 8, 12, 512, 512 })
-- padding: the last quarter of the keys of every sequence
local mask = slapo.cat({ slapo.zeros({ 8, 1, 1, 384 }), slapo.ones({ 8, 1, 1, 128 }) * -1e9 }, 3):to(device)
table.insert(cases, { "masked_softmax (8x12x512x512)", kernel = "masked_softmax", { s },
  function(s) return slapo.kernels.masked_softmax(s, mask, 0.125) end,
  function(s) return slapo.F.softmax(s * 0.125 + mask, -1) end })
local r, lw, lb = randn({ 64, 512, 768 }), randn({ 768 }), randn({ 768 })
table.insert(cases, { "bias+dropout+residual+LayerNorm (p=0.1)", kernel = "bias_dropout_add_layer_norm", { x, b, r, lw, lb },
  function(x, b, r, lw, lb)
    return slapo.kernels.bias_dropout_add_layer_norm(x, b, r, lw, lb, { p = 0.1, training = true })
  end,
  function(x, b, r, lw, lb) return slapo.F.layer_norm(slapo.F.dropout(x + b, 0.1, true) + r, { 768 }, lw, lb) end })
local q, k, v = randn({ 1, 4, 2048, 64 }), randn({ 1, 4, 2048, 64 }), randn({ 1, 4, 2048, 64 })
table.insert(cases, { "attention (causal, S=2048)", kernel = "attention", { q, k, v },
  function(q, k, v) return slapo.kernels.attention(q, k, v, { causal = true }) end,
  function(q, k, v) return slapo.F.scaled_dot_product_attention(q, k, v, { causal = true }) end })
-- Unfused and fused alternate, round by round, so a slow spell of the machine hits both; the
-- ratio is the median of the rounds' ratios.
local function measure(unfused_fn, fused_fn, rounds)
  unfused_fn()
  fused_fn()
  local unfused, fused, ratios = {}, {}, {}
  for r = 1, rounds do
    local t0 = slapo.clock()
    unfused_fn()
    local t1 = slapo.clock()
    fused_fn()
    local t2 = slapo.clock()
    unfused[r], fused[r], ratios[r] = t1 - t0, t2 - t1, (t2 - t1) / (t1 - t0)
  end
  return timing.median(unfused), timing.median(fused), timing.median(ratios)
end

print(("| kernel (fwd + bwd) on %s | unfused ATen | fused | fused / unfused (median of rounds) | peak tensor MiB, "
  .. "unfused -> fused |"):format(device))
print("|---|---|---|---|---|")
local ratios = {}
for _, case in ipairs(cases) do
  local unfused_step, fused_step = step(case[4], case[2]), step(case[3], case[2])
  local unfused, fused, ratio = measure(unfused_step, fused_step, 7)
  ratios[case.kernel] = ratio
  -- memory: the most the step's own tensors (activations kept for backward, temporaries,
  -- gradients) held at once, from the allocators' reports
  local unfused_mib, fused_mib = slapo.peak_tensor_mib(unfused_step), slapo.peak_tensor_mib(fused_step)
  print(("| %s | %.1f ms | %.1f ms | %.2f | %.0f -> %.0f |"):format(case[1], unfused * 1000, fused * 1000, ratio,
    unfused_mib, fused_mib))
end
if record then
  local choices = require("slapo.kernel_choices")
  local kind = choices.device_type(device)
  local machine = kind
  if kind == "cpu" then  -- the processor, as bench/run names it
    local info = io.open("/proc/cpuinfo")
    local model = info and info:read("*a"):match("model name%s*:%s*([^\n]+)")
    machine = ("%s cores, %s"):format(io.popen("nproc"):read("*l") or "?", model or "unknown CPU")
    if info then info:close() end
  end
  local path = choices.record(kind, ratios, ("bench/kernels.lua%s on %s, %s"):format(
    kind == "cpu" and "" or " --device " .. kind, machine, os.date("!%Y-%m-%d")))
  print(("recorded the %s ratios in %s"):format(kind, path))
end
