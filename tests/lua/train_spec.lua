-- slapo.train: LR schedule, gradient accumulation, clipping, metrics.jsonl and its plot.
local train = require("slapo.train")

local function tiny()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16, resid_pdrop = 0,
    embd_pdrop = 0, attn_pdrop = 0 })
end

describe("train", function()
  it("warms up linearly and decays with a cosine to min_lr", function()
    local o = { lr = 1.0, warmup = 4, steps = 14, schedule = "cosine", min_lr = 0.1 }
    eq(0.25, train.lr_at(1, o))
    eq(1.0, train.lr_at(4, o))
    assert(math.abs(train.lr_at(9, o) - 0.55) < 1e-12)
    assert(math.abs(train.lr_at(14, o) - 0.1) < 1e-12)
    o.schedule = "constant"
    eq(1.0, train.lr_at(10, o))
  end)

  it("accumulates micro-batches into the step a single batch would take", function()
    local a, b = slapo.randint(0, 64, { 2, 8 }), slapo.randint(0, 64, { 2, 8 })
    local whole = slapo.cat({ a, b }, 0)
    local one = tiny()
    slapo.train({ model = one, steps = 1, optimizer = "sgd", lr = 0.1, quiet = true, data = function() return whole end })
    local two = tiny()
    slapo.train({ model = two, steps = 1, optimizer = "sgd", lr = 0.1, quiet = true, grad_accum = 2,
      data = function(_, micro) return micro == 1 and a or b end })
    local theirs = two:state_dict()
    for name, p in pairs(one:state_dict()) do
      close(p, theirs[name], { rtol = 1e-5, atol = 1e-6 })
    end
  end)

  it("clips the gradient norm", function()
    local m = tiny()
    local ids = slapo.randint(0, 64, { 2, 8 })
    m(ids, { labels = ids }):backward()
    local before = slapo.clip_grad_norm(m, 0.01)
    assert(before > 0.01)
    local after = slapo.clip_grad_norm(m, 1e9)
    assert(math.abs(after - 0.01) < 1e-4, "norm after clipping " .. after)
  end)

  it("learns a fixed batch and writes metrics.jsonl that plots to SVG", function()
    local path = os.tmpname()
    local result = slapo.train({ model = tiny(), steps = 15, lr = 1e-2, warmup = 2, quiet = true, metrics = path,
      data = { vocab = 64, batch = 4, seq = 8 } })
    assert(result.final_loss < result.losses[1] - 0.5, ("loss %f -> %f"):format(result.losses[1], result.final_loss))
    local lines = {}
    for line in io.lines(path) do
      table.insert(lines, line)
    end
    eq(15, #lines)
    for _, key in ipairs({ "step", "loss", "lr", "tokens_per_s", "tflops", "mfu", "memory_mib" }) do
      matches('"' .. key .. '": ', lines[15])
    end
    local svg = require("slapo.plot").main(path, path .. ".svg")
    local text = io.open(svg):read("*a")
    matches("<svg", text)
    eq(2, select(2, text:gsub("<polyline", "")))
    os.remove(path)
    os.remove(svg)
  end)

  it("names unknown options and choices", function()
    matches("train: unknown option 'stpes'", pcall_err(slapo.train, { model = tiny(), data = {}, stpes = 3 }))
    matches("unknown schedule 'linear' %(choices: cosine, constant%)", pcall_err(slapo.train,
      { model = tiny(), data = {}, schedule = "linear" }))
    matches("'data' is required", pcall_err(slapo.train, { model = tiny() }))
  end)
end)

describe("training checkpoints", function()
  local function run(dir, steps, resume)
    slapo.manual_seed(0)
    local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 })
    slapo.manual_seed(77)  -- the training stream (dropout is on: 0.1 by default)
    return slapo.train({ model = model, steps = steps, lr = 1e-2, warmup = 2, quiet = true, checkpoint_dir = dir,
      checkpoint_every = 5, resume = resume, data = { vocab = 64, batch = 2, seq = 8 } }), model
  end

  it("resume continues the same loss curve bit-exactly", function()
    local dir = os.tmpname()
    os.remove(dir)
    local full, full_model = run(dir, 10, false)
    local resumed, resumed_model = run(dir .. "-copy", 10, dir .. "/step-000005")
    eq(6, resumed.first_step)
    for step = 6, 10 do
      eq(full.losses[step], resumed.losses[step], "step " .. step)
    end
    local theirs = resumed_model:state_dict()
    for name, p in pairs(full_model:state_dict()) do
      assert(p:equal(theirs[name]), name)
    end
    eq(dir .. "/step-000010", require("slapo.checkpoint").latest(dir))
    os.execute("rm -rf " .. dir .. " " .. dir .. "-copy")
  end)

  it("keeps the last good checkpoint when a save was cut off", function()
    local dir = os.tmpname()
    os.remove(dir)
    run(dir, 5, false)
    -- a save killed halfway leaves only its temporary directory
    os.execute("mkdir -p " .. dir .. "/.step-000010.tmp && echo broken > " .. dir .. "/.step-000010.tmp/trainer.json")
    local again = run(dir, 6, true)
    eq(6, again.first_step)
    os.execute("rm -rf " .. dir)
  end)
end)

describe("bf16 autocast", function()
  it("runs matmuls in bfloat16 inside and trains close to float32", function()
    local x, w = slapo.randn({ 4, 8 }), slapo.randn({ 8, 8 })
    eq("bfloat16", slapo.autocast("bf16", function() return x:matmul(w) end):dtype())
    eq("float32", x:matmul(w):dtype(), "the mode is restored")
    if not slapo.cuda.is_available() then
      matches("autocast: float16 autocast runs on CUDA and no GPU is usable here",
        pcall_err(slapo.autocast, "float16", function() end))
    end
    matches("unknown autocast dtype 'fp8' %(valid: bf16, bfloat16, fp16, float16%)",
      pcall_err(slapo.autocast, "fp8", function() end))
    pcall(slapo.autocast, "bf16", function() error("inside") end)
    eq("float32", x:matmul(w):dtype(), "the mode is restored after an error")
    local ids = slapo.randint(0, 64, { 4, 8 })
    local plain = slapo.train({ model = tiny(), steps = 8, lr = 1e-2, quiet = true, data = function() return ids end })
    local bf16 = slapo.train({ model = tiny(), steps = 8, lr = 1e-2, quiet = true, autocast = "bf16",
      data = function() return ids end })
    assert(math.abs(plain.losses[1] - bf16.losses[1]) < 0.05 * plain.losses[1])
    assert(bf16.final_loss < bf16.losses[1] - 0.5, "bf16 training learns")
  end)
end)

describe("grad_scaler (float16 loss scaling)", function()
  it("scales the loss, unscales the gradients, skips and backs off on inf, grows after clean steps", function()
    local model = tiny()
    local ids = slapo.randint(0, 64, { 2, 8 })
    local scaler = slapo.optim.grad_scaler({ init_scale = 1024, growth_interval = 2 })
    model(ids, { labels = ids }):backward()
    local plain = model:parameters()[1].grad:clone()
    for _, p in ipairs(model:parameters()) do p.grad:zero_() end
    scaler:scale(model(ids, { labels = ids })):backward()
    eq(false, scaler:unscale(model))
    assert((model:parameters()[1].grad - plain):abs():max():item() < 1e-6, "unscaled gradients equal the plain ones")
    scaler:update(false)
    scaler:update(false)
    eq(2048, scaler:value())
    model:parameters()[1].grad:mul_(0 / 0)  -- NaN everywhere
    eq(true, scaler:unscale(model))
    scaler:update(true)
    eq(1024, scaler:value())
    matches("grad_scaler: need init_scale > 0", pcall_err(slapo.optim.grad_scaler, { init_scale = 0 }))
  end)
end)
