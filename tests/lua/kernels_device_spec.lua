-- Each fused kernel on the test device in float32 against the CPU kernel in float64 (itself
-- checked against ATen to 1e-12 in tests/cpp/test_kernels.cpp): forward and every input
-- gradient. The device is SLAPO_TEST_DEVICE (default cpu); scripts/device-check sets it to cuda
-- on a GPU machine, where this is what checks the CUDA kernels through the slapo:: ops.
local device = test_device()

-- The dtype under test and its tolerance: float32 runs the kernels; bfloat16 runs each op's meaning
-- in ATen's ops (kernels/ops.cpp, aten_math), as under bf16 weights or autocast.
local dtype, tolerance = "float32", 2e-4

-- Runs fn on copies of `inputs` (float64 on the CPU, `dtype` on the device), backpropagates the
-- same random output gradient, and compares output and input gradients.
local function check(name, inputs, fn, opts)
  opts = opts or {}
  local tol = { rtol = tolerance, atol = tolerance }
  local function run(dtype, where)
    local args = {}
    for i, t in ipairs(inputs) do
      args[i] = t:to(dtype):to(where):detach()  -- a fresh leaf, also where `to` changes nothing
      if not (opts.no_grad and opts.no_grad[i]) then args[i]:requires_grad(true) end
    end
    return fn(args), args
  end
  local ref, ref_args = run("float64", "cpu")
  local out, args = run(dtype, device)
  eq(device, out:device():match("^(%a+)"))
  eq(dtype, out:dtype())
  slapo.manual_seed(99)
  local dy = slapo.randn(ref:size(), { dtype = "float64" })
  ref:backward(dy)
  out:backward(dy:to(dtype):to(device))
  close(ref, out:to("cpu"):double(), tol)
  for i, a in ipairs(ref_args) do
    if not (opts.no_grad and opts.no_grad[i]) then
      assert(a.grad and args[i].grad, ("%s: input %d got no gradient"):format(name, i))
      local ok, err = pcall(close, a.grad, args[i].grad:to("cpu"):double(), tol)
      assert(ok, ("%s: gradient of input %d: %s"):format(name, i, tostring(err)))
    end
  end
end

local function every_op(title)
  describe(title, function()
    it("bias_gelu, exact and tanh", function()
      slapo.manual_seed(1)
      local x, b = slapo.randn({ 4, 33, 96 }), slapo.randn({ 96 })
      for _, approximate in ipairs({ "none", "tanh" }) do
        check("bias_gelu " .. approximate, { x, b }, function(t)
          return slapo.kernels.bias_gelu(t[1], t[2], { approximate = approximate })
        end)
      end
    end)

    it("rms_norm and swiglu", function()
      slapo.manual_seed(2)
      check("rms_norm", { slapo.randn({ 3, 17, 128 }), slapo.randn({ 128 }) }, function(t)
        return slapo.kernels.rms_norm(t[1], t[2], 1e-6)
      end)
      check("swiglu", { slapo.randn({ 3, 17, 200 }), slapo.randn({ 3, 17, 200 }) }, function(t)
        return slapo.kernels.swiglu(t[1], t[2])
      end)
    end)

    it("rope with a true rotation (cos^2 + sin^2 = 1, the halves' angles alike)", function()
      slapo.manual_seed(3)
      local half = slapo.randn({ 2, 9, 16 })
      local a = slapo.cat({ half, half }, 2)  -- a RoPE table: both halves share their angles
      local cos = (1 - a * a) / (1 + a * a)
      local sin = (a * 2) / (1 + a * a)
      check("rope", { slapo.randn({ 2, 4, 9, 32 }), cos, sin }, function(t)
        return slapo.kernels.rope(t[1], t[2], t[3])
      end, { no_grad = { false, true, true } })
    end)

    it("attention: several tiles, causal and not, fewer queries than keys", function()
      for _, case in ipairs({ { 5, 7 }, { 200, 200 }, { 150, 300 } }) do
        for _, causal in ipairs({ false, true }) do
          slapo.manual_seed(case[1] + (causal and 1 or 0))
          local sq, sk = case[1], case[2]
          check(("attention %dx%d causal=%s"):format(sq, sk, tostring(causal)),
            { slapo.randn({ 2, 3, sq, 64 }), slapo.randn({ 2, 3, sk, 64 }), slapo.randn({ 2, 3, sk, 64 }) },
            function(t) return slapo.kernels.attention(t[1], t[2], t[3], { causal = causal }) end)
        end
      end
    end)

    -- Slapo's test_attention picks FlashAttention or the memory-efficient kernel by name: on a GPU
    -- each is checked as the kernels are (flash takes half precision only); elsewhere each is
    -- refused, saying what it needs.
    it("attention through SDPA's flash and efficient kernels by name", function()
      local backends = slapo.kernels.sdpa_backends()
      local q = slapo.randn({ 2, 3, 40, 64 })
      if device == "cpu" then
        for _, backend in ipairs({ "flash", "efficient" }) do
          matches(#backends > 0 and "runs on CUDA tensors" or "needs a CUDA build of LibTorch 2.x",
            pcall_err(slapo.kernels.attention, q, q, q, { backend = backend }))
        end
        return
      end
      eq(2, #backends, "a CUDA build of LibTorch 2.x offers both")
      for _, backend in ipairs(backends) do
        if backend ~= "flash" or dtype ~= "float32" then
          for _, causal in ipairs({ false, true }) do
            slapo.manual_seed(7)
            check(("attention %s causal=%s"):format(backend, tostring(causal)),
              { slapo.randn({ 2, 3, 40, 64 }), slapo.randn({ 2, 3, 40, 64 }), slapo.randn({ 2, 3, 40, 64 }) },
              function(t)  -- the float64 reference on the CPU through ATen's math
                local on_cpu = tostring(t[1]:device()) == "cpu"
                return slapo.kernels.attention(t[1], t[2], t[3], { causal = causal, backend = on_cpu and "auto" or backend })
              end)
          end
        end
      end
    end)

    it("masked_softmax with a broadcast padding mask", function()
      slapo.manual_seed(4)
      local mask = slapo.zeros({ 2, 1, 1, 40 })
      mask:narrow(3, 30, 10):add_(-10000)
      check("masked_softmax", { slapo.randn({ 2, 4, 40, 40 }), mask }, function(t)
        return slapo.kernels.masked_softmax(t[1], t[2], 0.125)
      end, { no_grad = { false, true } })
    end)

    it("bias_dropout_add_layer_norm without dropout (the masks come from each device's own generator)", function()
      slapo.manual_seed(5)
      local h = 96
      check("bias_dropout_add_layer_norm", { slapo.randn({ 3, 11, h }), slapo.randn({ h }), slapo.randn({ 3, 11, h }),
        slapo.randn({ h }), slapo.randn({ h }) }, function(t)
        return slapo.kernels.bias_dropout_add_layer_norm(t[1], t[2], t[3], t[4], t[5], { p = 0.1, training = false,
          eps = 1e-5 })
      end)
    end)

    it("bias_dropout_add_layer_norm with dropout: about p of the values dropped, kept ones scaled", function()
      slapo.manual_seed(6)
      local n, h = 64, 256
      local zeros = slapo.zeros({ h }, { dtype = dtype }):to(device)
      local x = slapo.randn({ n, h }, { dtype = dtype }):to(device)
      -- weight 1, bias 0 and no residual: the output is LayerNorm(dropout(x)); count what dropout zeroed
      -- through the input gradient, which is zero exactly where the mask dropped a value
      x:requires_grad(true)
      local y = slapo.kernels.bias_dropout_add_layer_norm(x, zeros, slapo.zeros({ n, h }, { dtype = dtype }):to(device),
        slapo.ones({ h }, { dtype = dtype }):to(device), zeros, { p = 0.25, training = true })
      y:backward(slapo.randn({ n, h }, { dtype = dtype }):to(device))
      local dropped = x.grad:eq(0):double():mean():item()
      assert(dropped > 0.2 and dropped < 0.3, ("dropped fraction %g, expected about 0.25"):format(dropped))
    end)
  end)
end

every_op("fused kernels on " .. device)
dtype, tolerance = "bfloat16", 1e-1  -- bfloat16 keeps 8 bits of mantissa; weight gradients sum 33 rows
every_op("fused ops in bfloat16 on " .. device .. " (ATen's ops; the kernels take float32)")
