-- fully_shard: each rank keeps 1/N of the parameters (and so of the gradients and AdamW's state),
-- gathers them for each call, and trains as one rank on every rank's rows together.

-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local world, rank = slapo.dist.world_size(), slapo.dist.rank()

-- FSDP2's layout: each block on its own, then the root (the embeddings, the final norm)
local function fully_sharded(model)
  local sch = slapo.create_schedule(model)
  for _, block in ipairs(sch["transformer.h"]:children()) do
    block:fully_shard()
  end
  sch:fully_shard()
  return sch
end

-- Raises unless the fully sharded model's weights, gathered, are the reference's.
local function same_weights_gathered(model, ref)
  local theirs = {}
  for name, p in model:named_parameters() do theirs[name] = p end
  for name, p in ref:named_parameters() do
    close(p, slapo.dist.all_gather(theirs[name]:detach(), 0), { rtol = 1e-4, atol = 5e-5 })
  end
end

local function sizes(model)
  local out = {}
  for name, p in model:named_parameters() do out[name] = p:size() end
  return out
end

describe("fully_shard", function()
  it("keeps 1/N of every parameter along its first axis and verifies against the unsharded model", function()
    local full = sizes(reference.tiny_gpt2())
    local sch = slapo.create_schedule(reference.tiny_gpt2())
    slapo.manual_seed(5)
    local ids = slapo.randint(0, 64, { 2, 8 })
    local report = slapo.verify(sch, { ids }, { rtol = 1e-5, atol = 1e-6 }, function(s)
      for _, block in ipairs(s["transformer.h"]:children()) do block:fully_shard() end
      s:fully_shard()
    end)
    eq(report.params, report.gradients, "every parameter's gradient compared, gathered")
    eq(0, report.skipped_params)
    local mine = sizes(sch.mod)
    for name, shape in pairs(full) do
      shape[1] = shape[1] / world
      eq(shape, mine[name], name)
    end
    matches("fully_shard%(%)", sch:log())
  end)

  it("holds 1/N of the parameters and of AdamW's state on each rank", function()
    local whole = reference.tiny_gpt2():num_params()
    local sch = fully_sharded(reference.tiny_gpt2())
    eq(whole / world, sch.mod:num_params())
    eq(whole, sch.mod:num_params({ gathered = true }), "what each call computes with (MFU's count)")
    matches("num_params: unknown option 'gatherd' %(valid: gathered%)", pcall_err(sch.mod.num_params, sch.mod,
      { gatherd = true }))
    local opt = slapo.optim.adamw(sch.mod, { lr = 1e-2 })
    local ids = slapo.randint(0, 64, { 2, 8 })
    sch.mod(ids, { labels = ids }):backward()
    opt:step()
    local state = 0
    for _, t in pairs(opt:state_tensors(sch.mod)) do
      if t:dim() > 0 then state = state + t:numel() end
    end
    eq(2 * whole / world, state, "exp_avg and exp_avg_sq of this rank's slices")
  end)

  it("holds nothing more after each step: what its collectives used is freed where the meter hears it", function()
    -- Gloo's worker thread used to drop the last reference to a reduced gradient now and then, a
    -- free LibTorch's thread-local memory reporting never saw: each step looked to keep ~10 MiB
    for _, make in ipairs({ function(m) return fully_sharded(m).mod, slapo.optim.adamw(m, { lr = 1e-2 }) end,
      function(m) return m, slapo.optim.zero_adamw(m, { lr = 1e-2 }) end }) do
      local model, opt = make(reference.tiny_gpt2())
      local ids = slapo.randint(0, 64, { 2, 8 })
      for step = 1, 4 do
        local held = slapo.held_tensor_mib(function()
          opt:zero_grad()
          model(ids, { labels = ids }):backward()
          opt:step()
          collectgarbage()
          collectgarbage()
        end)
        -- the first step makes the gradients and AdamW's state; later steps reuse them
        if step > 1 then assert(math.abs(held) < 1 / 1024, ("step %d held %.4f MiB"):format(step, held)) end
      end
    end
  end)

  it("trains as one rank on all ranks' rows: the same losses and weights", function()
    local all, mine = reference.rows()
    local ref, ref_losses = reference.train(all, 3, false)
    local sch = fully_sharded(reference.tiny_gpt2())
    local opt = slapo.optim.adamw(sch.mod, { lr = 1e-2, weight_decay = 0 })  -- as the reference
    for step = 1, 3 do
      opt:zero_grad()
      local loss = sch.mod(mine, { labels = mine })
      loss:backward()
      opt:step()
      local mean = loss:detach():clone()
      slapo.dist.all_reduce(mean)
      assert(math.abs(mean:item() / world - ref_losses[step]) < 1e-5 * ref_losses[step],
        ("step %d: mean loss %.7f over the ranks, one rank on all rows %.7f"):format(step, mean:item() / world,
          ref_losses[step]))
    end
    same_weights_gathered(sch.mod, ref)
  end)

  it("trains under slapo.train as one rank on all rows: global loss, clipped global norm, weights", function()
    local all, mine = reference.rows()
    local ref, ref_losses, ref_norms = reference.train(all, 3, 0.5)
    local sch = fully_sharded(reference.tiny_gpt2())
    local result = slapo.train({ model = sch.mod, steps = 3, lr = 1e-2, schedule = "constant", clip = 0.5,
      quiet = true, data = function() return mine end })
    reference.check_steps(result, ref_losses, ref_norms)
    same_weights_gathered(sch.mod, ref)
    matches("zero_adamw on a fully sharded model", pcall_err(slapo.train, { model = sch.mod, steps = 1,
      optimizer = "zero_adamw", quiet = true, data = function() return mine end }))
  end)

  it("splits a first axis the group does not divide as torch.chunk does, and trains as one rank", function()
    -- 67 tokens, 13 positions, width 30: on 2 ranks 34 + 33, 7 + 6 and 15 + 15 rows, on 4 ranks 17 x 3 + 16,
    -- 4 x 3 + 1 and 8 x 3 + 6 (the blocks' too, which arrive prefetched)
    local odd = { vocab_size = 67, n_positions = 13, n_embd = 30 }
    local all, mine = reference.rows()
    local ref, ref_losses, ref_norms = reference.train(all, 3, 0.5, nil, odd)
    local sch = fully_sharded(reference.tiny_gpt2(odd))
    local stride = math.ceil(67 / world)
    eq(math.max(0, math.min(stride, 67 - rank * stride)), sch.mod.transformer.wte.weight:size(0))
    local result = slapo.train({ model = sch.mod, steps = 3, lr = 1e-2, schedule = "constant", clip = 0.5,
      quiet = true, data = function() return mine end })
    reference.check_steps(result, ref_losses, ref_norms)
    local dir = "/tmp/slapo-fully-sharded-odd-" .. os.getenv("MASTER_PORT")
    slapo.save(sch, dir)  -- gathers each slice, padded to equal parts and cut back
    slapo.dist.barrier()
    local saved = slapo.models.from_pretrained(dir):state_dict()
    for name, p in pairs(ref:state_dict()) do close(p, saved[name], { rtol = 1e-4, atol = 5e-5 }) end
    slapo.dist.barrier()
    if rank == 0 then os.execute("rm -rf " .. dir) end
    -- and verify gathers every gradient the same way
    local report = slapo.verify(slapo.create_schedule(reference.tiny_gpt2(odd)), { mine }, { rtol = 1e-5, atol = 1e-6 },
      function(s)
        for _, block in ipairs(s["transformer.h"]:children()) do block:fully_shard() end
        s:fully_shard()
      end)
    eq(report.params, report.gradients)
  end)

  it("gives a rank an empty slice where a first axis is shorter than the group", function()
    -- a bias of 3 on 4 ranks: 1, 1, 1 and none; AdamW steps the slices, empty ones included
    local function model()
      slapo.manual_seed(8)
      return slapo.nn.Sequential({ slapo.nn.Linear(6, 3), slapo.nn.Linear(3, 6) })
    end
    local ref = model()
    slapo.manual_seed(2)
    local x = slapo.randn({ 2 * world, 6 })
    local ref_opt = slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 })
    for _ = 1, 3 do
      ref_opt:zero_grad()
      local y = ref(x)
      local loss = (y * y):mean()
      loss:backward()
      ref_opt:step()
    end
    local sch = slapo.create_schedule(model())
    sch:fully_shard()
    local stride = math.ceil(3 / world)
    eq(math.max(0, math.min(stride, 3 - rank * stride)), sch.mod["0"].bias:size(0))
    local opt = slapo.optim.adamw(sch.mod, { lr = 1e-2, weight_decay = 0 })
    local rows = x:narrow(0, 2 * rank, 2)
    for _ = 1, 3 do
      opt:zero_grad()
      local y = sch.mod(rows)
      local loss = (y * y):mean()
      loss:backward()
      opt:step()
    end
    local dir = "/tmp/slapo-fully-sharded-short-" .. os.getenv("MASTER_PORT")
    slapo.save(sch, dir)
    slapo.dist.barrier()
    local saved = slapo.load_tensors(dir .. "/model.safetensors")
    slapo.dist.barrier()
    if rank == 0 then os.execute("rm -rf " .. dir) end
    for name, p in pairs(ref:state_dict()) do close(p, saved[name], { rtol = 1e-4, atol = 5e-5 }) end
  end)

  it("saves one whole checkpoint that loads as the unsharded model", function()
    local ref = reference.tiny_gpt2():eval()
    local sch = fully_sharded(reference.tiny_gpt2())
    local dir = "/tmp/slapo-fully-sharded-" .. os.getenv("MASTER_PORT")
    slapo.save(sch, dir)
    slapo.dist.barrier()
    local loaded = slapo.models.from_pretrained(dir):eval()
    local ids = slapo.randint(0, 64, { 1, 6 })
    close(ref(ids), loaded(ids), { rtol = 1e-6, atol = 1e-6 })
    slapo.dist.barrier()
    if rank == 0 then os.execute("rm -rf " .. dir) end
  end)

  it("frees the whole parameters from forward to backward (reshard_after_forward) and gathers them again", function()
    -- four 1 MiB weights; autograd keeps three of them for backward (the first layer's input needs
    -- no gradient, so its weight is not saved)
    local function run(reshard)
      slapo.manual_seed(9)
      local model = slapo.nn.Sequential({ slapo.nn.Linear(512, 512), slapo.nn.Linear(512, 512),
        slapo.nn.Linear(512, 512), slapo.nn.Linear(512, 512) })
      local sch = slapo.create_schedule(model)
      for _, layer in ipairs(sch:children()) do layer:fully_shard({ reshard_after_forward = reshard }) end
      slapo.manual_seed(10 + rank)
      local x = slapo.randn({ 2, 512 })
      collectgarbage()
      local out
      local held = slapo.held_tensor_mib(function()
        local y = model(x)
        out = (y * y):sum()
      end)
      out:backward()
      local grads = {}
      for name, p in model:named_parameters() do grads[name] = p.grad end
      return held, grads, sch
    end
    local kept, kept_grads = run(false)
    local freed, freed_grads, sch = run(true)
    assert(kept > 2.9, ("kept whole through forward: %.2f MiB held for backward"):format(kept))
    assert(freed < 0.1, ("resharded after forward: %.2f MiB held for backward"):format(freed))
    for name, g in pairs(kept_grads) do
      eq(true, g:equal(freed_grads[name]), name .. "'s gradient, gathered again for backward")
    end
    matches('sch%["0"%]:fully_shard%(', sch:log())
  end)

  it("gathers again for backward only what backward reads, and its ledger says what the peaks held", function()
    slapo.manual_seed(9)
    local model = slapo.nn.Sequential({ slapo.nn.Linear(512, 512), slapo.nn.Linear(512, 512),
      slapo.nn.Linear(512, 512), slapo.nn.Linear(512, 512) })
    local sch = slapo.create_schedule(model)
    for _, layer in ipairs(sch:children()) do layer:fully_shard() end
    slapo.manual_seed(10 + rank)
    local x = slapo.randn({ 2, 512 })
    collectgarbage()
    local before = slapo._fully_shard_prefetches().not_gathered_again
    local out
    local forward = slapo.tensor_peak(function()
      local y = model(x)
      out = (y * y):sum()
    end)
    local backward = slapo.tensor_peak(function() out:backward() end)
    -- a linear's backward reads its weight (for its input's gradient) and never its bias; the first
    -- layer's input needs no gradient, so its weight is not read either
    eq(5, slapo._fully_shard_prefetches().not_gathered_again - before, "biases and the first weight")
    local what = ("forward peak %.3f MiB (gathered %.3f, reducing %.3f); backward peak %.3f MiB (gathered %.3f, "
      .. "reducing %.3f)"):format(forward.mib, forward.gathered_mib, forward.reducing_mib, backward.mib,
      backward.gathered_mib, backward.reducing_mib)
    -- forward: one layer's weight and bias whole at a time (no root above chains a prefetch)
    assert(math.abs(forward.gathered_mib - (1 + 2 / 1024)) < 1e-3 and forward.reducing_mib == 0, what)
    -- backward: weights gathered again (a layer's, and the one after it until autograd lets it go), never a
    -- bias; one layer's gradients in their reduce-scatter at a time (the layer after it lands first)
    assert(backward.gathered_mib > 0.99 and backward.gathered_mib < 2.01, what)
    assert(backward.reducing_mib > 0.99 and backward.reducing_mib < 1.01, what)
    assert(backward.mib >= backward.gathered_mib + backward.reducing_mib, what)
  end)

  it("gathers a weight and reduce-scatters its gradient larger than a chunk (32 MiB on Gloo) piece by piece, equal to the whole one's", function()
    local function linear()
      slapo.manual_seed(21)
      return slapo.nn.Linear(2304, 4096)  -- a 36 MiB weight
    end
    local whole, sharded = linear(), linear()
    slapo.create_schedule(sharded):fully_shard()
    slapo.manual_seed(22)
    local xs = {}
    for r = 1, world do xs[r] = slapo.randn({ 2, 2304 }) end
    local sum
    for r = 1, world do
      local y = whole(xs[r])
      sum = sum and sum + (y * y):mean() or (y * y):mean()
    end
    (sum / world):backward()
    local y = sharded(xs[rank + 1])
    ;(y * y):mean():backward()
    local rows = 4096 / world
    close(whole.weight.grad:narrow(0, rank * rows, rows), sharded.weight.grad, { rtol = 1e-5, atol = 1e-8 })
    close(whole.bias.grad:narrow(0, rank * rows, rows), sharded.bias.grad, { rtol = 1e-5, atol = 1e-8 })
  end)

  it("verifies resharded and kept layers alike, and under checkpoint", function()
    slapo.manual_seed(4)
    local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64,
      n_positions = 16, resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 }))
    slapo.manual_seed(6)
    local ids = slapo.randint(0, 64, { 2, 8 })
    local report = slapo.verify(sch, { ids }, { rtol = 1e-5, atol = 1e-6 }, function(s)
      s["transformer.h.0"]:fully_shard({ reshard_after_forward = false })
      s["transformer.h.1"]:checkpoint()
      s["transformer.h.1"]:fully_shard()
      s:fully_shard()
    end)
    eq(report.params, report.gradients)
    -- the log replays the option as written, not the default
    matches('sch%["transformer%.h%.0"%]:fully_shard%({ *reshard_after_forward = false *}%)', sch:log())
  end)

  it("prefetches each block while the call before it computes, in forward and backward, with the losses of no prefetch, bit for bit", function()
    local function train(prefetch)
      local sch = slapo.create_schedule(reference.tiny_gpt2())
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ prefetch = prefetch }) end
      sch:fully_shard({ prefetch = prefetch })
      local opt = slapo.optim.adamw(sch.mod, { lr = 1e-2 })
      slapo.manual_seed(7 + rank)
      local losses = {}
      for step = 1, 3 do
        local ids = slapo.randint(0, 64, { 2, 8 })
        opt:zero_grad()
        local loss = sch.mod(ids, { labels = ids })
        loss:backward()
        opt:step()
        losses[step] = loss:item()
      end
      return losses, sch
    end
    local before = slapo._fully_shard_prefetches()
    local off = train(false)
    eq(before.used, slapo._fully_shard_prefetches().used, "prefetch = false prefetched")
    eq(before.backward, slapo._fully_shard_prefetches().backward, "prefetch = false prefetched in backward")
    local on, sch = train(true)
    local after = slapo._fully_shard_prefetches()
    -- each step the root's call prefetches block 0's parameters, block k's call block k + 1's
    local per_step, blocks = 0, #sch["transformer.h"]:children()
    for _, block in ipairs(sch["transformer.h"]:children()) do
      for _ in block.mod:named_parameters() do per_step = per_step + 1 end
    end
    eq(3 * per_step, after.used - before.used)
    eq(0, after.stale - before.stale, "a prefetch outlived an optimizer step")
    -- in backward the root's gather starts the last block's, block k's block k - 1's
    eq(3 * blocks, after.backward - before.backward)
    eq(off, on)
  end)

  it("reduces each block's gradients while the block before it computes backward, with the gradients of waiting in place, bit for bit", function()
    local function train(overlap)
      local sch = slapo.create_schedule(reference.tiny_gpt2())
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ overlap_reduce = overlap }) end
      sch:fully_shard({ overlap_reduce = overlap })
      local opt = slapo.optim.adamw(sch.mod, { lr = 1e-2 })
      slapo.manual_seed(11 + rank)
      local losses, grads = {}, {}
      for step = 1, 3 do
        local ids = slapo.randint(0, 64, { 2, 8 })
        opt:zero_grad()
        local loss = sch.mod(ids, { labels = ids })
        loss:backward()
        eq(0, slapo._fully_shard_reductions().in_flight, "a reduction still in flight after backward")
        for name, p in sch.mod:named_parameters() do grads[step .. name] = p.grad:clone() end
        opt:step()
        losses[step] = loss:item()
      end
      return losses, grads, sch
    end
    local before = slapo._fully_shard_reductions()
    local off_losses, off_grads = train(false)
    local between = slapo._fully_shard_reductions()
    eq(before.beside_backward + before.at_end, between.beside_backward + between.at_end, "overlap_reduce = false left one in flight")
    local on_losses, on_grads, sch = train(true)
    local after = slapo._fully_shard_reductions()
    local tensors = 0
    for _ in sch.mod:named_parameters() do tensors = tensors + 1 end
    -- every slice's reduction landed once a step: most beside the next block's backward, the
    -- embeddings' (used first in forward, so reduced last) when backward ended
    eq(3 * tensors, (after.beside_backward - between.beside_backward) + (after.at_end - between.at_end))
    assert(after.beside_backward - between.beside_backward > after.at_end - between.at_end,
      "most reductions ran beside the backward of the block before")
    eq(off_losses, on_losses)
    for key, g in pairs(off_grads) do assert(g:equal(on_grads[key]), "step and gradient " .. key .. " differ") end
  end)

  it("reduces in place inside checkpoint's recomputation, whose gradients autograd.grad returns", function()
    local function train(overlap)
      local sch = slapo.create_schedule(reference.tiny_gpt2())
      for _, block in ipairs(sch["transformer.h"]:children()) do
        block:checkpoint()
        block:fully_shard({ overlap_reduce = overlap })
      end
      slapo.manual_seed(31 + rank)
      local ids = slapo.randint(0, 64, { 2, 8 })
      sch.mod(ids, { labels = ids }):backward()
      local grads = {}
      for name, p in sch.mod:named_parameters() do grads[name] = p.grad end
      return grads
    end
    local off = train(false)
    local before = slapo._fully_shard_reductions()
    local on = train(true)
    local after = slapo._fully_shard_reductions()
    eq(before.beside_backward + before.at_end, after.beside_backward + after.at_end,
      "a block's gradients went through autograd.grad, not the queue")
    for name, g in pairs(off) do assert(g:equal(on[name]), name .. "'s gradient differs") end
  end)

  it("drops a failed backward's reductions: none lands later, and the next backward lands its own", function()
    local fail_recompute = false
    local function build(overlap)
      slapo.manual_seed(4)
      local pre = slapo.nn.Module({ type = "Pre", children = { fc = slapo.nn.Linear(8, 8) },
        forward = function(self, x)
          if fail_recompute then error("the recomputation failed", 0) end
          return self.fc(x)
        end })
      local m = slapo.nn.Module({ type = "M", children = { pre = pre, a = slapo.nn.Linear(8, 8), b = slapo.nn.Linear(8, 8) },
        forward = function(self, x)
          local y = self.b(self.a(self.pre(x)))
          return (y * y):sum()
        end })
      local sch = slapo.create_schedule(m)
      sch["pre"]:checkpoint()  -- its recomputation runs last in backward, after a's and b's reductions started
      sch["a"]:fully_shard({ overlap_reduce = overlap })
      sch["b"]:fully_shard({ overlap_reduce = overlap })
      return m, slapo.optim.sgd(m, { lr = 0.1 })
    end
    local m, opt = build(true)
    local ref, ref_opt = build(false)
    slapo.manual_seed(20 + rank)
    local x = slapo.randn({ 4, 8 })
    local before = slapo._fully_shard_reductions()
    local loss = m(x)
    fail_recompute = true
    matches("the recomputation failed", pcall_err(loss.backward, loss))
    fail_recompute = false
    local after = slapo._fully_shard_reductions()
    eq(0, after.in_flight)
    eq(2, after.dropped - before.dropped, "a's weight and bias were in flight when backward failed")
    opt:zero_grad()
    ref_opt:zero_grad()
    m(x):backward()
    ref(x):backward()
    eq(0, slapo._fully_shard_reductions().in_flight, "the next backward landed its own at its end")
    local theirs = {}
    for name, p in ref:named_parameters() do theirs[name] = p.grad end
    for name, p in m:named_parameters() do assert(p.grad:equal(theirs[name]), name .. "'s gradient differs") end
  end)

  -- transformers' T5 computes the relative position bias inside the first block's call and hands it
  -- on: with each block its own unit, the first block's table must be whole when the bias is made.
  it("lays out an encoder-decoder (T5: both stacks' blocks, checkpointed, then the root) and trains as one rank", function()
    local cfg = { d_model = 32, d_kv = 8, d_ff = 64, num_layers = 2, num_decoder_layers = 2, num_heads = 4,
      vocab_size = 64, relative_attention_num_buckets = 8, relative_attention_max_distance = 16, dropout_rate = 0 }
    local function t5() slapo.manual_seed(21); return slapo.models.t5(cfg) end
    local function lay_out(s)
      for _, stack in ipairs({ "encoder.block", "decoder.block" }) do
        for _, block in ipairs(s[stack]:children()) do block:checkpoint():fully_shard() end
      end
      s:fully_shard()
    end
    local all, mine = reference.rows()
    local report = slapo.verify(slapo.create_schedule(t5()), { mine, { labels = mine } }, { rtol = 1e-4 }, lay_out)
    eq(report.params, report.gradients, "every parameter's gradient compared, gathered")
    local ref, sch = t5(), slapo.create_schedule(t5())
    lay_out(sch)
    local opts = { slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 }),
      slapo.optim.adamw(sch.mod, { lr = 1e-2, weight_decay = 0 }) }
    for step = 1, 3 do
      opts[1]:zero_grad()
      opts[2]:zero_grad()
      local expected = reference.replicas_loss(ref, all, world)
      expected:backward()
      opts[1]:step()
      local loss = sch.mod(mine, { labels = mine })
      loss:backward()
      opts[2]:step()
      local mean = loss:detach():clone()
      slapo.dist.all_reduce(mean)
      assert(math.abs(mean:item() / world - expected:item()) < 1e-5 * expected:item(),
        ("step %d: mean loss %.7f over the ranks, one rank on all rows %.7f"):format(step, mean:item() / world,
          expected:item()))
    end
    same_weights_gathered(sch.mod, ref)
  end)

  -- Built from shapes alone, each rank initialises the model a module at a time and keeps its
  -- slices: its peak is its share plus one module's whole parameters (the embedding here), where
  -- a whole initialised copy held the entire model besides.
  it("builds from the meta device holding its share and one module's whole parameters, not the model", function()
    local cfg = { n_embd = 128, n_layer = 8, n_head = 4, vocab_size = 4096, n_positions = 32 }
    local sch = fully_sharded(slapo.models.gpt2(cfg, { device = "meta" }))
    local model
    local peak = slapo.peak_tensor_mib(function() model = slapo.build(sch) end)
    local whole = slapo.models.gpt2(cfg, { device = "meta" }):num_params() * 4 / 2 ^ 20
    local largest = cfg.vocab_size * cfg.n_embd * 4 / 2 ^ 20
    local bound = whole / world + largest + 0.5
    assert(peak < bound, ("build peaked at %.2f MiB on rank %d; its share %.2f MiB plus the largest tensor %.2f MiB "
      .. "allows %.2f (the whole model is %.2f MiB)"):format(peak, rank, whole / world, largest, bound, whole))
    -- the values a whole model gets from the same seed, each rank its slices
    local ref = slapo.build(slapo.create_schedule(slapo.models.gpt2(cfg, { device = "meta" })))
    same_weights_gathered(model, ref)
  end)

  it("refuses what it cannot shard, by name, and changes nothing", function()
    slapo.manual_seed(3)
    local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64,
      n_positions = 16 }))
    local before = sizes(sch.mod)
    sch["transformer.h.0.mlp.c_fc"]:shard("weight", 1)
    matches("fully_shard: 'mlp%.c_fc%.weight' of 'transformer%.h%.0' is already split by shard over the same ranks",
      pcall_err(function() sch["transformer.h.0"]:fully_shard() end))
    eq(before["transformer.h.0.attn.c_attn.weight"], sizes(sch.mod)["transformer.h.0.attn.c_attn.weight"])
    sch["transformer.h.1"]:fully_shard()
    matches("fully_shard: 'transformer.h.1' is already fully sharded",
      pcall_err(function() sch["transformer.h.1"]:fully_shard() end))
    matches("fully_shard on 'transformer.h.1.attn': unknown option 'reshard' %(valid: reshard_after_forward, prefetch, overlap_reduce, group%)",
      pcall_err(function() sch["transformer.h.1.attn"]:fully_shard({ reshard = false }) end))
    matches("fully_shard on 'transformer.h.1.attn': options must be a table like {reshard_after_forward = false}, "
      .. "got boolean", pcall_err(function() sch["transformer.h.1.attn"]:fully_shard(false) end))
    matches("fully_shard: 'transformer%.h%.1%.attn' is inside 'transformer%.h%.1', which is already fully sharded; "
      .. "apply fully_shard to the inner modules first", pcall_err(function() sch["transformer.h.1.attn"]:fully_shard() end))
    -- GPT-2's embedding is its LM head: a unit holding one of them alone would run the other on a slice
    local tied = slapo.create_schedule(reference.tiny_gpt2())
    local whole, log = sizes(tied.mod), tied:log()
    matches("fully_shard: 'weight' of 'transformer%.wte' is tied to 'lm_head%.weight' outside it; a unit must hold "
      .. "every use of its parameters: fully_shard a module that contains both", pcall_err(function()
        tied["transformer.wte"]:fully_shard()
      end))
    eq(log, tied:log())
    eq(whole["transformer.wte.weight"], sizes(tied.mod)["transformer.wte.weight"])
    tied:fully_shard()  -- the root holds both
  end)
end)

describe("fully_shard across a layout's data-parallel ranks, tensor parallelism inside (2-D)", function()
  local function needs_four()
    if world ~= 4 then
      skip("TP 2 x fully sharded DP 2 needs 4 ranks (scripts/test runs this file on 4)")
    end
  end

  -- Megatron's tensor parallelism over the layout's tp group, then each block and the root fully
  -- sharded over its dp group: each rank keeps half of its TP slice.
  local function two_d(sch, layout)
    require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
    for _, block in ipairs(sch["transformer.h"]:children()) do
      block:fully_shard({ group = layout.dp_group })
    end
    sch:fully_shard({ group = layout.dp_group })
  end

  it("keeps half of each TP slice and verifies outputs and gathered gradients against the unsharded model", function()
    needs_four()
    local layout = require("slapo.parallel").layout({ tp = 2 })
    local full = sizes(reference.tiny_gpt2())
    local sch = slapo.create_schedule(reference.tiny_gpt2(), { group = layout.tp_group })
    slapo.manual_seed(5)
    local ids = slapo.randint(0, 64, { 2, 8 })
    -- atol as the TP specs: a row-parallel sum adds in another order
    local report = slapo.verify(sch, { ids }, { rtol = 1e-5, atol = 1e-5 }, function(s) two_d(s, layout) end)
    eq(report.params, report.gradients, "every gradient compared, gathered over dp then tp")
    local mine, fc, wpe = sizes(sch.mod), full["transformer.h.0.mlp.c_fc.weight"], full["transformer.wpe.weight"]
    eq({ fc[1] / 2, fc[2] / 2 }, mine["transformer.h.0.mlp.c_fc.weight"], "column-parallel, then half its rows")
    eq({ wpe[1] / 2, wpe[2] }, mine["transformer.wpe.weight"], "whole under TP, then half its rows")
    matches("fully_shard%(args%[1%]%)", sch:log(), "a group is not Lua source: the log replays it from args")
  end)

  it("trains under slapo.train as one rank on all rows: losses and clipped norms over 5 AdamW steps", function()
    needs_four()
    local layout = require("slapo.parallel").layout({ tp = 2 })
    local all = reference.rows():narrow(0, 0, 2 * layout.dp)
    local mine = all:narrow(0, 2 * layout.dp_rank, 2)
    local ref, ref_losses, ref_norms = reference.train(all, 5, 0.5, layout.dp)
    local sch = slapo.create_schedule(reference.tiny_gpt2(), { group = layout.tp_group })
    two_d(sch, layout)
    local result = slapo.train({ model = sch.mod, steps = 5, lr = 1e-2, schedule = "constant", clip = 0.5,
      quiet = true, layout = layout, data = function() return mine end })
    reference.check_steps(result, ref_losses, ref_norms)
    local dir = "/tmp/slapo-2d-" .. os.getenv("MASTER_PORT")
    slapo.save(sch, dir)  -- gathered over dp, then tp: the whole model
    slapo.dist.barrier()
    local theirs = slapo.models.from_pretrained(dir):state_dict()
    for name, p in pairs(ref:state_dict()) do
      close(p, theirs[name], { rtol = 1e-4, atol = 5e-5 })
    end
    slapo.dist.barrier()
    if rank == 0 then os.execute("rm -rf " .. dir) end
  end)

  it("refuses a group that shares ranks with shard's, by name, changing nothing", function()
    needs_four()
    local layout = require("slapo.parallel").layout({ tp = 2 })
    local sch = slapo.create_schedule(reference.tiny_gpt2(), { group = layout.tp_group })
    require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
    local before, log = sizes(sch.mod), sch:log()
    matches("fully_shard: '[%w_.]+' of 'transformer%.h%.0' is already split by shard over the same ranks %(group %d+ "
      .. "%(ranks [%d, ]+%)%); fully_shard the modules that shard leaves whole, or fully shard across the "
      .. "data%-parallel ranks", pcall_err(function()
        sch["transformer.h.0"]:fully_shard({ group = layout.tp_group })
      end))
    matches("fully_shard: '[%w_.]+' of 'transformer%.h%.0' is split by shard over group %d+ %(ranks [%d, ]+%); "
      .. "fully_shard's group, the world %(4 ranks%), shares ranks with it, so it is not a data%-parallel group",
      pcall_err(function() sch["transformer.h.0"]:fully_shard({ group = slapo.dist.world() }) end))
    matches("fully_shard on 'transformer.h.0': option 'group'", pcall_err(function()
      sch["transformer.h.0"]:fully_shard({ group = 2 })
    end))
    eq(before, sizes(sch.mod))
    eq(log, sch:log())
  end)
end)

describe("fully_shard inside pipeline stages: each stage's blocks over the ranks that run it", function()
  local function needs_four()
    if world ~= 4 then
      skip("pp 2 x fully sharded dp 2 needs 4 ranks (scripts/test runs this file on 4)")
    end
  end

  local function gpt2()
    return reference.tiny_gpt2({ n_layer = 4 })
  end

  -- Cut after block 1; with `over`, every block fully sharded over that group.
  local function pipelined(layout, over)
    local sch = slapo.create_schedule(gpt2())
    if over then
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ group = over }) end
    end
    sch["transformer.h.1"]:cut_pipeline_stage()
    return sch
  end

  local function train(layout, fully)
    local sch = pipelined(layout, fully and layout.dp_group)
    local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, dp_group = layout.dp_group,
      micro_batches = 2, schedule = "1f1b" } })
    slapo.manual_seed(4)
    local ids = slapo.randint(0, 64, { 8, 8 }):narrow(0, 4 * layout.dp_rank, 4)
    pipe:prepare(ids)
    local opt = slapo.optim.adamw(pipe:parameters(), { lr = 1e-2, weight_decay = 0 })
    local losses = {}
    for step = 1, 3 do
      opt:zero_grad()
      losses[step] = pipe:step(ids, { labels = ids })
      opt:step()
    end
    return losses, pipe
  end

  it("trains as the same pipeline with whole blocks, holding half of each block", function()
    needs_four()
    local layout = require("slapo.parallel").layout({ tp = 1, pp = 2 })
    local plain = train(layout, false)
    local before = slapo._fully_shard_prefetches()
    local losses, pipe = train(layout, true)
    local after = slapo._fully_shard_prefetches()
    -- each stage's first block prefetches its second, every micro-batch of every step
    local second = 0  -- tensors of a block
    for _ in gpt2().transformer.h["1"]:named_parameters() do second = second + 1 end
    eq(3 * 2 * second, after.used - before.used, "the second block's parameters arrive prefetched")
    eq(before.stale, after.stale)
    for step = 1, 3 do
      assert(math.abs(losses[step] - plain[step]) < 1e-5 * plain[step],
        ("step %d: fully sharded %.7f, whole blocks %.7f"):format(step, losses[step], plain[step]))
    end
    local whole = sizes(gpt2())
    for name, p in pipe:named_parameters() do
      if name:match("^transformer%.h%.") then
        eq(whole[name][1] / 2, p:size(0), name .. ": half of its rows")
      end
    end
  end)

  it("loads sliced from a checkpoint: each stage reads its own blocks' slices, as loading everything", function()
    needs_four()
    local layout = require("slapo.parallel").layout({ tp = 1, pp = 2 })
    local dir = "/tmp/slapo-fully-sharded-stages-" .. os.getenv("MASTER_PORT")
    if rank == 0 then slapo.save(gpt2(), dir) end
    slapo.dist.barrier()
    local function stages(model)
      local sch = slapo.create_schedule(model)
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ group = layout.dp_group }) end
      sch["transformer.h.1"]:cut_pipeline_stage()
      local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, dp_group = layout.dp_group,
        micro_batches = 2 } })
      pipe:prepare(slapo.randint(0, 64, { 4, 8 }))  -- the other stage's blocks are traced with stand-ins
      return pipe
    end
    local lazy, eager = stages(slapo.models.from_pretrained(dir, { device = "meta" })), stages(slapo.models.from_pretrained(dir))
    local theirs = {}
    for name, p in eager:named_parameters() do theirs[name] = p end
    for name, p in lazy:named_parameters() do eq(true, p:equal(theirs[name]), name) end
    slapo.dist.barrier()
    if rank == 0 then os.execute("rm -rf " .. dir) end
  end)

  it("verifies against the unscheduled model: the loss and every gradient, gathered", function()
    needs_four()
    local layout = require("slapo.parallel").layout({ tp = 1, pp = 2 })
    slapo.manual_seed(5)
    local ids = slapo.randint(0, 64, { 4, 8 })
    local report, pipe = slapo.verify(slapo.create_schedule(gpt2()), { ids }, { pipeline = { group = layout.pp_group,
      micro_batches = 2 } }, function(s)
        for _, block in ipairs(s["transformer.h"]:children()) do block:fully_shard({ group = layout.dp_group }) end
        s["transformer.h.1"]:cut_pipeline_stage()
      end)
    eq(#pipe:parameters(), report.gradients, "every parameter of this rank's stage, the blocks' gathered")
    eq(0, report.skipped_params)
  end)

  it("refuses a unit around a cut and a group that spans stages, by name", function()
    needs_four()
    local layout = require("slapo.parallel").layout({ tp = 1, pp = 2 })
    local around = pipelined(layout, layout.dp_group)
    around:fully_shard({ group = layout.dp_group })
    matches("build: the root module is fully sharded and contains the pipeline cut after 'transformer%.h%.1'; .*"
      .. "fully_shard the layers each stage calls instead", pcall_err(slapo.build, around,
        { pipeline = { group = layout.pp_group, micro_batches = 2 } }))
    local spanning = pipelined(layout, slapo.dist.world())
    local pipe = slapo.build(spanning, { pipeline = { group = layout.pp_group, micro_batches = 2 } })
    matches("build: 'transformer%.h%.0%.[%w_.]+' is fully sharded over ranks {0, 1, 2, 3}, which run pipeline "
      .. "stages {[01], [01], [01], [01]}; .*group = layout%.dp_group", pcall_err(function()
        pipe:prepare(slapo.randint(0, 64, { 4, 8 }))
      end))
  end)
end)
