-- slapo.train: LR schedule, gradient accumulation, clipping, metrics.jsonl and its plot.
local train = require("slapo.train")

local function tiny()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16, resid_pdrop = 0,
    embd_pdrop = 0, attn_pdrop = 0 })
end

describe("train", function()
  -- transformers' lambdas (get_cosine_schedule_with_warmup, get_cosine_with_min_lr_schedule_with_warmup,
  -- get_linear_schedule_with_warmup, get_constant_schedule_with_warmup) times lr = 2 at 0 .. steps - 1,
  -- computed with their formulas in Python: the lr of optimizer steps 1 .. steps.
  local hf = {
    { { schedule = "cosine", warmup = 3, steps = 10, min_lr = 0 }, { 0.0, 0.6666666666666666, 1.3333333333333333,
      2.0, 1.900968867902419, 1.6234898018587336, 1.2225209339563143, 0.7774790660436857, 0.3765101981412665,
      0.09903113209758097 } },
    { { schedule = "cosine", warmup = 3, steps = 10, min_lr = 0.2 }, { 0.0, 0.6666666666666666, 1.3333333333333333,
      2.0, 1.910871981112177, 1.6611408216728603, 1.3002688405606828, 0.8997311594393171, 0.5388591783271399,
      0.2891280188878229 } },
    { { schedule = "cosine", warmup = 0, steps = 1, min_lr = 0 }, { 2.0 } },
    { { schedule = "linear", warmup = 2, steps = 8, min_lr = 0 }, { 0.0, 1.0, 2.0, 1.6666666666666667,
      1.3333333333333333, 1.0, 0.6666666666666666, 0.3333333333333333 } },
    { { schedule = "constant", warmup = 2, steps = 5, min_lr = 0 }, { 0.0, 1.0, 2.0, 2.0, 2.0 } },
  }

  it("gives transformers' learning rates step for step", function()
    for _, case in ipairs(hf) do
      local o, expected = case[1], case[2]
      o.lr = 2.0
      for step = 1, o.steps do
        local got = train.lr_at(step, o)
        assert(math.abs(got - expected[step]) < 1e-12, ("%s warmup %d steps %d min_lr %g, step %d: %.17g, "
          .. "transformers %.17g"):format(o.schedule, o.warmup, o.steps, o.min_lr, step, got, expected[step]))
      end
    end
  end)

  it("moves the weights on every step whose lr is above 0, the last one too", function()
    -- reference: plain SGD with transformers' cosine (warmup 1, 4 steps) at lr = 0.1: 0, 0.1, 0.075, 0.025
    local hf_lrs = { 0.0, 0.1, 0.075, 0.025 }
    local ids = slapo.randint(0, 64, { 2, 8 })
    local ref = tiny()
    local sgd = slapo.optim.sgd(ref, { lr = 0.1 })
    for step = 1, 4 do
      sgd:set_lr(hf_lrs[step])
      sgd:zero_grad()
      ref(ids, { labels = ids }):backward()
      sgd:step()
    end
    local snapshots = { [0] = tiny():state_dict() }
    local trained = tiny()
    slapo.train({ model = trained, steps = 4, warmup = 1, optimizer = "sgd", lr = 0.1, quiet = true,
      data = function() return ids end,
      on_step = function(step, m)
        snapshots[step] = {}
        for name, p in pairs(m:state_dict()) do
          snapshots[step][name] = p:clone()
        end
      end })
    local theirs = trained:state_dict()
    for name, p in pairs(ref:state_dict()) do
      close(p, theirs[name], { rtol = 1e-5, atol = 1e-7 })
    end
    for step = 1, 4 do
      local key = "transformer.h.0.mlp.c_fc.weight"
      eq(hf_lrs[step] > 0, not snapshots[step][key]:equal(snapshots[step - 1][key]), "step " .. step .. " moved the weights")
    end
    local one = tiny()
    slapo.train({ model = one, steps = 1, lr = 1e-2, quiet = true, data = function() return ids end })
    assert(not one.lm_head.weight:equal(tiny().lm_head.weight), "a one-step run trains")
  end)

  it("accumulates micro-batches into the step a single batch would take", function()
    local a, b = slapo.randint(0, 64, { 2, 8 }), slapo.randint(0, 64, { 2, 8 })
    local whole = slapo.cat({ a, b }, 0)
    local one = tiny()  -- reference: one plain SGD step on the whole batch
    local sgd = slapo.optim.sgd(one, { lr = 0.1 })
    one(whole, { labels = whole }):backward()
    sgd:step()
    local two = tiny()
    slapo.train({ model = two, steps = 1, optimizer = "sgd", lr = 0.1, quiet = true, grad_accum = 2,
      data = function(_, micro) return micro == 1 and a or b end })
    local theirs, untrained = two:state_dict(), tiny():state_dict()
    for name, p in pairs(one:state_dict()) do
      close(p, theirs[name], { rtol = 1e-5, atol = 1e-6 })
    end
    assert(not theirs["transformer.h.0.attn.c_attn.weight"]:equal(untrained["transformer.h.0.attn.c_attn.weight"]),
      "the accumulated step moved the weights")
  end)

  it("seed = n seeds the run's random stream before training", function()
    local function dropout_model()
      slapo.manual_seed(0)
      return slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 })
    end
    local ids = slapo.randint(0, 64, { 2, 8 })
    local function run(model, seed)
      return slapo.train({ model = model, steps = 3, lr = 1e-2, quiet = true, seed = seed,
        data = function() return ids end })
    end
    local reference_model, seeded_model = dropout_model(), dropout_model()
    slapo.manual_seed(5)
    local reference = run(reference_model, nil)
    slapo.manual_seed(99)  -- another stream: seed = 5 replaces it
    local seeded = run(seeded_model, 5)
    for step = 1, 3 do
      eq(reference.losses[step], seeded.losses[step], "step " .. step)
    end
    matches("train: seed must be an integer >= 0 or false", pcall_err(slapo.train,
      { model = tiny(), data = {}, seed = -1 }))
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
    matches("unknown schedule 'cosin' %(choices: cosine, linear, constant%)", pcall_err(slapo.train,
      { model = tiny(), data = {}, schedule = "cosin" }))
    matches("train: min_lr is the floor of the cosine schedule; schedule 'linear' takes none", pcall_err(slapo.train,
      { model = tiny(), data = {}, schedule = "linear", min_lr = 0.1 }))
    matches("'data' is required", pcall_err(slapo.train, { model = tiny() }))
  end)
end)

describe("masked_lm", function()
  it("hides the chosen tokens as transformers' collator does, the labels only there", function()
    local masked_lm = require("slapo.masked_lm")
    local spec = masked_lm.check({ mask_id = 7 }, slapo.models.bert({ vocab_size = 64, hidden_size = 16,
      num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 32 }))
    eq({ probability = 0.15, mask_id = 7, vocab = 64 }, spec)
    slapo.manual_seed(1)
    local ids = slapo.randint(8, 64, { 64, 128 })  -- no id is the mask's
    local inputs, labels = masked_lm.mask(ids, spec)
    local chosen = labels:ne(-100):long()
    local n = chosen:sum():item()
    assert(math.abs(n / ids:numel() - 0.15) < 0.01, ("%.4f of the tokens chosen"):format(n / ids:numel()))
    eq(0, (chosen * (labels - ids)):abs():sum():item(), "a chosen token's label is the token")
    eq(0, ((1 - chosen) * (inputs - ids)):abs():sum():item(), "what is not chosen is shown as it is")
    local as_mask = inputs:eq(7):long():sum():item() / n
    local kept = (chosen * inputs:eq(ids):long()):sum():item() / n
    assert(math.abs(as_mask - 0.8) < 0.03 and kept > 0.08 and kept < 0.13,
      ("of the chosen: %.3f shown as the mask, %.3f kept"):format(as_mask, kept))
    -- refused by name: the mask outside the vocabulary, a probability of 1, an unknown option
    matches("masked_lm.mask_id must be the mask token's id, an integer from 0 to 63, got 64",
      pcall_err(masked_lm.check, { mask_id = 64, vocab = 64 }))
    matches("masked_lm.probability must be a number between 0 and 1 %(exclusive%), got 1",
      pcall_err(masked_lm.check, { mask_id = 1, vocab = 64, probability = 1 }))
    matches("masked_lm has no option 'prob' %(options: probability, mask_id, vocab%)",
      pcall_err(masked_lm.check, { mask_id = 1, vocab = 64, prob = 0.2 }))
  end)

  it("trains a masked LM under slapo.train: the loss over the hidden tokens falls", function()
    slapo.manual_seed(0)
    local model = slapo.models.bert({ vocab_size = 32, hidden_size = 32, num_hidden_layers = 1,
      num_attention_heads = 2, intermediate_size = 64, hidden_dropout_prob = 0, attention_probs_dropout_prob = 0,
      architectures = { "BertForMaskedLM" } })
    local rows = slapo.randint(2, 32, { 8, 16 })
    local result = slapo.train({ model = model, steps = 30, lr = 1e-2, quiet = true, seed = 3,
      data = function() return rows end, masked_lm = { mask_id = 1 } })
    assert(result.losses[30] < result.losses[1] - 0.5, ("%.3f -> %.3f"):format(result.losses[1], result.losses[30]))
  end)
end)

describe("span_corruption", function()
  local function t5(vocab)
    slapo.manual_seed(0)
    return slapo.models.t5({ d_model = 32, d_kv = 8, d_ff = 64, num_layers = 1, num_decoder_layers = 1, num_heads = 4,
      vocab_size = vocab, relative_attention_num_buckets = 8, relative_attention_max_distance = 16, dropout_rate = 0 })
  end

  it("drops spans for sentinels as T5's pipeline does: its lengths, and the row read back whole", function()
    local corruption = require("slapo.span_corruption")
    local spec = corruption.check({ sentinel = 99 }, t5(100))
    eq({ density = 0.15, mean_span = 3, sentinel = 99, eos = 1 }, spec)
    -- transformers' run_t5_mlm_flax.py: 568 tokens make a 512-token input and a 114-token target
    local noise, spans, input, target = corruption.lengths(568, spec)
    eq({ 85, 28, 512, 114 }, { noise, spans, input, target })
    slapo.manual_seed(4)
    local ids = slapo.randint(2, 80, { 16, 64 })
    local inputs, labels = corruption.corrupt(ids, spec)
    noise, spans, input, target = corruption.lengths(64, spec)
    eq({ 16, input }, inputs:size())
    eq({ 16, target }, labels:size())
    local function rows_of(t)  -- tolist is flat
      local flat, shape, out = t:tolist(), t:size(), {}
      for r = 1, shape[1] do out[r] = { unpack(flat, (r - 1) * shape[2] + 1, r * shape[2]) } end
      return out
    end
    local rows, ins, outs, starts = rows_of(ids), rows_of(inputs), rows_of(labels), {}
    for r = 1, #rows do
      -- each sentinel in the input stands for the run after the same sentinel in the labels
      local dropped, sentinel = {}, nil
      for _, id in ipairs(outs[r]) do
        if id >= 99 - spans + 1 or id == 1 then
          sentinel = id
          dropped[id] = {}
        else
          table.insert(dropped[sentinel], id)
        end
      end
      local whole, used = {}, 0
      for _, id in ipairs(ins[r]) do
        if id >= 99 - spans + 1 then
          assert(#dropped[id] >= 1, "every span drops a token or more")
          for _, t in ipairs(dropped[id]) do whole[#whole + 1] = t end
          used = used + 1
        elseif id ~= 1 then
          whole[#whole + 1] = id
        end
      end
      eq(spans, used)
      eq(rows[r], whole, "row " .. r .. " read back from its input and labels")
      eq(rows[r][1], ins[r][1], "a row starts with a kept token")
      starts[table.concat(ins[r], ",", 1, 8)] = true
    end
    local distinct = 0
    for _ in pairs(starts) do distinct = distinct + 1 end
    assert(distinct > 8, "the spans fall differently in each row")
    -- refused by name
    matches("span_corruption.sentinel must be a token id, an integer from 0 to 99, got 100",
      pcall_err(corruption.check, { sentinel = 100 }, t5(100)))
    matches("span_corruption has no option 'noise' %(options: density, mean_span, sentinel, eos%)",
      pcall_err(corruption.check, { sentinel = 9, noise = 0.2 }))
    matches("span_corruption trains an encoder%-decoder .*GPT2LMHeadModel is not one",
      pcall_err(corruption.check, { sentinel = 9 }, slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2,
        vocab_size = 32, n_positions = 16 })))
    matches("masked_lm %(BERT's objective%) and span_corruption %(T5's%) are one or the other",
      pcall_err(slapo.train, { model = t5(100), data = { vocab = 100, batch = 1, seq = 8 }, masked_lm = { mask_id = 1 },
        span_corruption = { sentinel = 99 } }))
  end)

  it("trains T5 under slapo.train: the loss over the dropped spans falls", function()
    local rows = slapo.randint(2, 60, { 8, 32 })
    local result = slapo.train({ model = t5(64), steps = 30, lr = 1e-2, quiet = true, seed = 3,
      data = function() return rows end, span_corruption = { sentinel = 63 } })
    assert(result.losses[30] < result.losses[1] - 0.5, ("%.3f -> %.3f"):format(result.losses[1], result.losses[30]))
  end)
end)

describe("step_flops", function()
  it("counts what each family runs: ALBERT's shared layers each time, T5's encoder and decoder on their own " ..
    "lengths, Mixtral's routed experts",
    function()
    local per_row = require("slapo.step_flops").per_row
    local gpt2 = slapo.models.gpt2({ n_embd = 16, n_layer = 2, n_head = 2, vocab_size = 32, n_positions = 16 })
    eq((6 * gpt2:num_params() + 12 * 2 * 16 * 8) * 8, per_row(gpt2)(8))
    -- 3 layers over one shared layer: its parameters run 3 times
    local albert = slapo.models.albert({ embedding_size = 8, hidden_size = 16, num_hidden_layers = 3,
      num_attention_heads = 2, intermediate_size = 32, vocab_size = 32, max_position_embeddings = 16 })
    local shared = albert.albert.encoder.albert_layer_groups:num_params()
    eq((6 * (albert:num_params() + 2 * shared) + 12 * 3 * 16 * 8) * 8, per_row(albert)(8))
    -- span corruption of 64 tokens: a 58-token input (54 kept, 3 sentinels, eos) and a 14-token target (3 sentinels, 10 dropped, eos)
    local t5 = slapo.models.t5({ d_model = 16, d_kv = 4, d_ff = 32, num_layers = 2, num_decoder_layers = 1,
      num_heads = 2, vocab_size = 40 })
    local spec = require("slapo.span_corruption").check({ sentinel = 39 }, t5)
    local encoder, decoder, head = t5.encoder.block:num_params(), t5.decoder.block:num_params(), 40 * 16
    local width = 2 * 4
    eq(6 * (encoder * 58 + (decoder + head) * 14) + 12 * width * (2 * 58 * 58 + 1 * (14 * 14 + 14 * 58)),
      per_row(t5, nil, spec)(64))
    -- Mixtral, 4 experts top-2: a token runs 2 experts of each of 2 layers, not the 4 the model holds
    local mixtral = slapo.models.mixtral({ hidden_size = 16, intermediate_size = 24, num_hidden_layers = 2,
      num_attention_heads = 2, num_key_value_heads = 1, num_local_experts = 4, num_experts_per_tok = 2,
      vocab_size = 32, max_position_embeddings = 16 })
    local one_expert = 3 * 16 * 24
    eq((6 * (mixtral:num_params() - 2 * 2 * one_expert) + 12 * 2 * 16 * 8) * 8, per_row(mixtral)(8))
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
    eq(dir .. "/step-000006", require("slapo.checkpoint").latest(dir), "the last step is saved too")
    os.execute("rm -rf " .. dir)
  end)

  it("checks itself: a missing file or a changed byte is refused naming the file, the model as it was", function()
    local dir = os.tmpname()
    os.remove(dir)
    run(dir, 5, false)
    local step = dir .. "/step-000005"
    local function resume_from(copy)
      local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 })
      local before = model:state_dict()
      local message = pcall_err(slapo.train, { model = model, steps = 6, quiet = true, resume = copy,
        data = { vocab = 64, batch = 2, seq = 8 } })
      for name, p in pairs(model:state_dict()) do assert(p:equal(before[name]), name .. " changed") end
      return message
    end
    local function damaged(edit)
      local copy = dir .. "/copy"
      os.execute(("rm -rf %s && cp -r %s %s"):format(copy, step, copy))
      edit(copy)
      return copy
    end
    local no_index = damaged(function(copy) os.remove(copy .. "/index.json") end)
    matches("^resume: '" .. no_index:gsub("%p", "%%%0") .. "' lacks index%.json, which its trainer%.json lists: the "
      .. "checkpoint is incomplete; resume from another checkpoint", resume_from(no_index))
    -- one byte inside the weights, as a shard damaged on disk: nothing else would notice
    local flipped = damaged(function(copy)
      local f = assert(io.open(copy .. "/model-rank0.safetensors", "r+b"))
      local size = f:seek("end")
      f:seek("set", size - 3)
      local byte = f:read(1)
      f:seek("set", size - 3)
      f:write(string.char((byte:byte() + 1) % 256))
      f:close()
    end)
    matches("^resume: " .. flipped:gsub("%p", "%%%0") .. "/model%-rank0%.safetensors is not the file that was saved "
      .. "%(its CRC%-32 differs from the %x+ trainer%.json recorded%)", resume_from(flipped))
    local no_rng = damaged(function(copy) os.remove(copy .. "/rng-rank0.safetensors") end)
    matches("lacks rng%-rank0%.safetensors", resume_from(no_rng))
    -- the synthetic data's shape is recorded too: other rows would be other batches
    matches("was trained on other data.*vocab_size 64, now 32", pcall_err(slapo.train, { model = slapo.models.gpt2({
      n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 }), steps = 6, quiet = true,
      resume = step, data = { vocab = 32, batch = 2, seq = 8 } }))
    os.execute("rm -rf " .. dir)
  end)

  it("refuses a checkpoint whose writer left a parameter's optimizer state out, naming it", function()
    local dir = os.tmpname()
    os.remove(dir)
    -- a writer that drops one parameter's moments from the optimizer file (as a pipeline stage once
    -- did with a tied weight): the checksums still agree, so only the recorded list tells
    local write_pieces = slapo._write_pieces
    slapo._write_pieces = function(module, path, state)
      if path:find("optimizer%-rank") then
        for name in pairs(state) do
          if name:find("^transformer%.h%.0%.mlp%.c_fc%.weight%.") then state[name] = nil end
        end
      end
      return write_pieces(module, path, state)
    end
    local ok, err = pcall(run, dir, 5, false)
    slapo._write_pieces = write_pieces
    assert(ok, err)
    matches("^resume: '.*step%-000005' holds no optimizer state for 'transformer%.h%.0%.mlp%.c_fc%.weight', which "
      .. "rank 0 held when it wrote the checkpoint: the checkpoint is incomplete; resume from another",
      pcall_err(run, dir, 6, true))
    os.execute("rm -rf " .. dir)
  end)

  it("a finished run run again returns its recorded result", function()
    local dir = os.tmpname()
    os.remove(dir)
    local full = run(dir, 10, false)
    local again = run(dir, 10, true)
    eq(11, again.first_step)
    eq(full.final_loss, again.final_loss)
    for step = 1, 10 do
      eq(full.losses[step], again.losses[step], "step " .. step)
    end
    matches("train: .*step%-000010 is at step 10, past steps = 9", pcall_err(run, dir, 9, true))
    os.execute("rm -rf " .. dir)
  end)

  it("metrics.jsonl after a resume holds each step once", function()
    local dir, path = os.tmpname(), os.tmpname()
    os.remove(dir)
    local function attempt(crash_at)
      slapo.manual_seed(0)
      local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 })
      return slapo.train({ model = model, steps = 8, lr = 1e-2, quiet = true, checkpoint_dir = dir,
        checkpoint_every = 5, metrics = path, data = { vocab = 64, batch = 2, seq = 8 },
        on_step = function(step) if step == crash_at then error("killed") end end })
    end
    matches("killed", pcall_err(attempt, 7))  -- past the checkpoint of step 5: steps 6 and 7 are logged
    local resumed = attempt(nil)
    eq(6, resumed.first_step)
    local steps = {}
    for line in io.lines(path) do
      table.insert(steps, slapo.json_decode(line).step)
    end
    eq({ 1, 2, 3, 4, 5, 6, 7, 8 }, steps)
    os.execute("rm -rf " .. dir .. " " .. path)
  end)

  it("restores slapo.random's tracker streams", function()
    local dir = os.tmpname()
    os.remove(dir)
    local function drawn(steps, resume)
      slapo.random.model_parallel_seed(7, 0)  -- the data come from the tracker's stream
      slapo.manual_seed(0)
      local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16,
        resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
      return slapo.train({ model = model, steps = steps, lr = 1e-2, quiet = true, checkpoint_dir = dir,
        checkpoint_every = 3, resume = resume, data = function()
          return slapo.random.get_tracker():fork(function() return slapo.randint(0, 64, { 2, 8 }) end)
        end })
    end
    local full = drawn(6, false)
    local resumed = drawn(6, dir .. "/step-000003")
    eq(4, resumed.first_step)
    for step = 4, 6 do
      eq(full.losses[step], resumed.losses[step], "step " .. step)
    end
    os.execute("rm -rf " .. dir)
  end)

  it("re-saving a step survives SIGKILL at every point: latest names a complete checkpoint", function()
    local dir = os.tmpname()
    os.remove(dir)
    run(dir, 4, false)  -- steps 1..4, checkpoints at 4 (and none else: every 5)
    os.execute(("cp -a %s %s.base"):format(dir, dir))
    local script = dir .. ".resave.lua"
    local points = { "written", "linked", "latest names the new files", "old moved aside", "new in place",
      "latest names the step" }
    for _, at in ipairs(points) do
      os.execute(("rm -rf %s && cp -a %s.base %s"):format(dir, dir, dir))
      -- the run is redone from the start with another lr and saves step 4 again; killed at `at`
      local f = assert(io.open(script, "w"))
      f:write(([[
require("slapo.checkpoint").on_point = function(name) if name == %q then os.execute("kill -9 $PPID") end end
slapo.manual_seed(0)
local model = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 })
slapo.train({ model = model, steps = 4, lr = 3e-2, quiet = true, checkpoint_dir = %q, checkpoint_every = 4,
  resume = false, data = { vocab = 64, batch = 2, seq = 8 } })
]]):format(at, dir))
      f:close()
      local r = slapo.run_process({ slapo._executable(), "run", script }, { timeout = 120 })
      eq("signaled", r.status, "killed at '" .. at .. "'")
      eq(9, r.signal)
      local latest = require("slapo.checkpoint").latest(dir)
      for _, file in ipairs({ "trainer.json", "model-rank0.safetensors", "optimizer-rank0.safetensors" }) do
        assert(io.open(latest .. "/" .. file),
          ("killed at '%s': latest names %s, which has no %s"):format(at, latest, file))
      end
      local again = run(dir, 4, true)
      eq(5, again.first_step, "killed at '" .. at .. "'")
      assert(again.final_loss, "killed at '" .. at .. "': the recorded result")
    end
    os.execute(("rm -rf %s %s.base %s"):format(dir, dir, script))
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

  it("keeps its scale and count of clean steps in training checkpoints", function()
    local scaler = slapo.optim.grad_scaler({ init_scale = 1024, growth_interval = 3 })
    scaler:update(true)
    scaler:update(false)
    scaler:update(false)
    eq({ scale = 512, clean_steps = 2 }, scaler:state())
    local model = tiny()
    local optimizer = slapo.optim.adamw(model, { lr = 1e-3 })
    local checkpoint = require("slapo.checkpoint")
    local dir = os.tmpname()
    os.remove(dir)
    checkpoint.save(dir, 1, model, optimizer, nil, { scaler = scaler:state() })
    local _, trainer = checkpoint.load(checkpoint.latest(dir), model, optimizer)
    os.execute("rm -rf " .. dir)
    local resumed = slapo.optim.grad_scaler({ init_scale = 1024, growth_interval = 3 })
    resumed:set_state(trainer.scaler)
    resumed:update(false)
    eq(1024, resumed:value(), "the resumed scaler grows on the third clean step, as the saved one would")
    matches("grad_scaler:set_state: expected {scale = a positive number, clean_steps = a count}, got scale %-1",
      pcall_err(resumed.set_state, resumed, { scale = -1, clean_steps = 0 }))
  end)
end)

describe("CUDA random streams", function()
  it("are listed per device and set only on devices this process has", function()
    local states = slapo.cuda_rng_states()
    if #states == 0 then
      eq({}, states)
      matches("set_cuda_rng_states: 1 CUDA generator states, but this process has 0 CUDA devices",
        pcall_err(slapo.set_cuda_rng_states, { slapo.rng_state() }))
      return
    end
    local before = slapo.randn({ 4 }, { device = "cuda" })
    slapo.set_cuda_rng_states(states)
    eq(true, before:equal(slapo.randn({ 4 }, { device = "cuda" })), "the same state draws the same numbers")
  end)
end)

describe("bad batches", function()
  it("are reported with the step, the micro-batch and what the data function gave", function()
    local m = slapo.models.gpt2({ n_embd = 16, n_head = 2, n_layer = 1, vocab_size = 32, n_positions = 16 })
    local function run(data) return pcall_err(slapo.train, { model = m, steps = 2, quiet = true, data = data }) end
    eq("train: step 1, micro-batch 1: the data function must return a tensor of token ids [batch, seq], got string",
      run(function() return "abc" end))
    eq("train: step 1, micro-batch 1: the data function must return int64 token ids [batch, seq], got float32 [2, 20]",
      run(function() return slapo.randn({ 2, 20 }) end))
    matches("^train: step 2, micro%-batch 1: the model failed on the data function's token ids %(input_ids and labels: "
      .. "shape %[2, 8%], ids %d+ %.%. 40%): Embedding: token id 40 is out of range",
      run(function(step)
        local ids = slapo.randint(0, 32, { 2, 8 })
        if step == 2 then ids = slapo.cat({ ids:narrow(1, 0, 7), (slapo.ones({ 2, 1 }) * 40):to("int64") }, 1) end
        return ids
      end))
    matches("^train: step 1, micro%-batch 1: .*a sequence of 20 tokens is longer than n_positions 16",
      run(function() return slapo.randint(0, 32, { 2, 20 }) end))
    matches("^train: step 1, micro%-batch 1: the data function failed: .*no more data",
      run(function() error("no more data", 0) end))
  end)
end)
