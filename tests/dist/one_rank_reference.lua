-- The reference the multi-rank training specs compare slapo.train with: one model trained by a
-- plain loop, on the rows every rank holds together. The specs beside it load it into their own
-- environment (its assert and close are the runner's); it is not a spec itself.
local M = {}

-- A tiny GPT-2 without dropout, the same on every call; `config` changes its sizes.
function M.tiny_gpt2(config)
  slapo.manual_seed(3)
  local sizes = { n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 }
  for key, value in pairs(config or {}) do sizes[key] = value end
  return slapo.models.gpt2(sizes)
end

-- Rows of 8 tokens, 2 a rank, the same on every rank: all of them, and this rank's.
function M.rows()
  local world, rank = slapo.dist.world_size(), slapo.dist.rank()
  slapo.manual_seed(4)
  local all = slapo.randint(0, 64, { 2 * world, 8 })
  return all, all:narrow(0, 2 * rank, 2)
end

-- The mean of `world` replicas' losses on two rows each of `all`, summed in data parallelism's
-- order (AdamW's first steps amplify a change in that order); `options` more of the model's keywords.
function M.replicas_loss(model, all, world, options)
  local sum = nil
  for r = 0, world - 1 do
    local rows = all:narrow(0, 2 * r, 2)
    local kw = { labels = rows }
    for key, value in pairs(options or {}) do kw[key] = value end
    local loss = model(rows, kw)
    sum = sum and sum + loss or loss
  end
  return sum / world
end

-- `steps` steps of AdamW (lr 1e-2, no weight decay: slapo.train's default), with clip_grad_norm
-- `clip` unless it is false, on the mean of the replicas' losses (`replicas`, default one a rank,
-- two rows each): the loss on all rows, its gradient summed in data parallelism's order (AdamW's
-- first steps move each weight by about lr * sign(gradient), which amplifies a change in the
-- order of summation). `config` sizes the model as tiny_gpt2's. Returns the model, losses, norms and
-- the AdamW optimizer.
function M.train(all, steps, clip, replicas, config)
  local world = replicas or slapo.dist.world_size()
  local ref = M.tiny_gpt2(config)
  local whole = ref(all, { labels = all }):item()
  local adamw = slapo.optim.adamw(ref, { lr = 1e-2, weight_decay = 0 })
  local losses, norms = {}, {}
  for step = 1, steps do
    adamw:zero_grad()
    local loss = M.replicas_loss(ref, all, world)
    loss:backward()
    losses[step] = loss:item()
    norms[step] = clip and slapo.clip_grad_norm(ref, clip)
    adamw:step()
  end
  assert(math.abs(losses[1] - whole) < 1e-6 * whole, "the mean of the ranks' losses is the loss on all rows")
  assert(not clip or norms[1] > clip, "the clip acts")
  return ref, losses, norms, adamw
end

--- Raises unless zero_adamw's first moments, its slices added up over `dp_group` (this stage's
--- replicas), are the one-process AdamW's for the pipeline's parameters. They are linear in the
--- gradient, so a gradient summed where it should be averaged (or the reverse) shows as dp times
--- theirs, which AdamW's steps hide. A rank whose optimizer is AdamW has nothing to check.
function M.same_first_moments(optimizer, pipe, ref_optimizer, ref, dp_group, where)
  local slice = optimizer:state_tensors(pipe.module)["zero.exp_avg"]
  if not slice then return end
  local mine = slapo.tensor({ (slice * slice):sum():item() }, { dtype = "float64" })
  slapo.dist.all_reduce(mine, dp_group)
  local theirs, want = ref_optimizer:state_tensors(ref), 0
  for name in pipe:named_parameters() do
    local moment = theirs[name .. ".exp_avg"]
    want = want + (moment * moment):sum():item()
  end
  assert(math.abs(mine:item() - want) < 1e-4 * want, ("%s: zero_adamw's first moments have %.6g as their squares' "
    .. "sum, the one-process AdamW's %.6g"):format(where, mine:item(), want))
end

-- Raises unless slapo.train's result followed the reference: weights (AdamW's rounding shows as
-- about 1e-5 after 3 steps of lr 1e-2), and each step's loss and gradient norm.
function M.check(result, ref, losses, norms)
  local theirs = result.model:state_dict()
  for name, p in pairs(ref:state_dict()) do
    close(p, theirs[name], { rtol = 1e-4, atol = 5e-5 })
  end
  M.check_steps(result, losses, norms)
end

-- Raises unless each step's loss and gradient norm followed the reference's.
function M.check_steps(result, losses, norms)
  for step = 1, #losses do
    assert(math.abs(result.losses[step] - losses[step]) < 1e-5 * losses[step],
      ("step %d: loss %.7f, one rank on all rows %.7f"):format(step, result.losses[step], losses[step]))
    assert(math.abs(result.grad_norms[step] - norms[step]) < 1e-5 * norms[step],
      ("step %d: grad norm %.7f, one rank on all rows %.7f"):format(step, result.grad_norms[step], norms[step]))
  end
end

-- Writes `text` to `path` from rank 0, then waits until every rank may read it (a schedule file
-- the hot-swap cases edit under a running slapo.train).
-- The parameters of `model` by name.
function M.named(model)
  local out = {}
  for name, p in model:named_parameters() do out[name] = p end
  return out
end

-- 3 AdamW steps (lr 1e-2) of pipeline `pipe` beside the one-process model `ref` on rows `ids`: the
-- loss to 1e-5 relative every step (`where` names the layout in failures) and, unless
-- `opts.gradients` is false, every gradient the pipeline holds. `opts.expected(step)`: ref's loss,
-- a tensor this backpropagates (default: on `ids` with labels `ids`). `opts.labels`: the step's
-- labels (default `ids`); `opts.keywords`: the model's keyword tensors by name, given to each step.
-- Returns the step-1 loss and ref's parameters by name.
function M.pipeline_steps_as_one_process(pipe, ref, ids, where, opts)
  opts = opts or {}
  local expected_loss = opts.expected or function() return ref(ids, { labels = ids }) end
  -- the step's table: the labels (the ids by default) and the model's keywords (opts.keywords)
  local step_table = { labels = opts.labels or ids }
  for name, t in pairs(opts.keywords or {}) do step_table[name] = t end
  pipe:prepare(ids, opts.keywords or {})
  local adamw = { slapo.optim.adamw(ref, { lr = 1e-2 }), slapo.optim.adamw(pipe:parameters(), { lr = 1e-2 }) }
  local first
  for step = 1, 3 do
    adamw[1]:zero_grad()
    adamw[2]:zero_grad()
    local expected = expected_loss(step)
    expected:backward()
    local loss = pipe:step(ids, step_table)
    first = first or loss
    assert(math.abs(loss - expected:item()) < 1e-5 * expected:item(),
      ("step %d: loss %.7f in one process, %.7f %s"):format(step, expected:item(), loss, where))
    if opts.gradients ~= false then
      local theirs, compared = M.named(ref), 0
      for name, p in pipe:named_parameters() do
        close(theirs[name].grad, p.grad, { rtol = 1e-4, atol = 1e-5 })
        compared = compared + 1
      end
      assert(compared > 10, "compared " .. compared .. " gradients")
    end
    adamw[1]:step()
    adamw[2]:step()
  end
  return first, M.named(ref)
end

-- Each row's position_ids for packed documents of the given lengths (0 where each starts).
function M.packed_positions(lengths_by_row)
  local rows = {}
  for _, lengths in ipairs(lengths_by_row) do
    local row = {}
    for _, n in ipairs(lengths) do for i = 0, n - 1 do row[#row + 1] = i end end
    rows[#rows + 1] = row
  end
  return slapo.tensor(rows, { dtype = "int64" })
end

-- `steps` losses of `step(i)` (a number each): every one finite, the last below the first (a low
-- precision run that trains, where its numbers cannot equal float32's).
function M.losses_fall(steps, step)
  local losses = {}
  for i = 1, steps do
    losses[i] = step(i)
    assert(losses[i] == losses[i] and losses[i] < math.huge, ("step %d: loss %s"):format(i, losses[i]))
  end
  assert(losses[steps] < losses[1], ("loss %.4f after %d steps, %.4f at the first"):format(losses[steps], steps,
    losses[1]))
  return losses
end

function M.write_shared(path, text)
  if slapo.dist.rank() == 0 then
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
  end
  slapo.dist.barrier()
end

return M
