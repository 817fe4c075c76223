-- GPT-2 at TP = 2 inside each node x DP = 2 across nodes (4 ranks, 2 per node), trained by
-- slapo.train with SGD; every step's loss must equal one process's plain loop on all rows to
-- 1e-5, and the tensor-parallel groups must not cross a node. Prints "multinode ok" on rank 0.
-- arg[1]: steps (4). MULTINODE_CHECKPOINTS=DIR saves every 2 steps there (and resumes from it);
-- MULTINODE_FAIL_AT=K makes the last rank exit with code 3 after step K of the first attempt
-- (TORCHELASTIC_RESTART_COUNT 0), so a launcher with --max-restarts starts every rank again.
local d = slapo.dist
local steps = tonumber(arg[1] or "4")
assert(d.world_size() == 4, "4 ranks, got " .. d.world_size())
local per_node = tonumber(os.getenv("LOCAL_WORLD_SIZE"))
local layout = require("slapo.parallel").layout({ tp = 2 })
local node = math.floor(d.rank() / per_node)
assert(d.node_rank() == node and d.local_rank() == d.rank() % per_node and d.local_world_size() == per_node,
  ("rank %d: node %d, local rank %d of %d"):format(d.rank(), d.node_rank(), d.local_rank(), d.local_world_size()))
for _, r in ipairs(layout.tp_ranks) do
  assert(math.floor(r / per_node) == node, ("rank %d's tp group {%s} leaves node %d"):format(d.rank(),
    table.concat(layout.tp_ranks, ", "), node))
end

local function tiny_gpt2()
  slapo.manual_seed(3)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64, n_positions = 16,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
end
slapo.manual_seed(4)
local all = slapo.randint(0, 64, { 2 * layout.dp, 8 })
local mine = all:narrow(0, 2 * layout.dp_rank, 2)

-- MULTINODE_READY_AT=K: rank 0 writes MULTINODE_HOLD/ready after step K, and the run trains until a
-- fault ends it (no reference, no check).
local ready_at = tonumber(os.getenv("MULTINODE_READY_AT") or "")
local fail_at = tonumber(os.getenv("MULTINODE_FAIL_AT") or "")
local ref = tiny_gpt2()
local sgd = slapo.optim.sgd(ref, { lr = 0.5 })
local ref_losses = {}
for step = 1, ready_at and 0 or steps do
  sgd:zero_grad()
  local loss = ref(all, { labels = all })
  loss:backward()
  ref_losses[step] = loss:item()
  sgd:step()
end

local sch = slapo.create_schedule(tiny_gpt2(), { group = layout.tp_group })
require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
local result = slapo.train({ model = slapo.build(sch), steps = steps, optimizer = "sgd", lr = 0.5, weight_decay = 0,
  schedule = "constant", quiet = true, layout = layout, data = function() return mine end,
  checkpoint_dir = os.getenv("MULTINODE_CHECKPOINTS") or false, checkpoint_every = 2,
  on_step = function(step)
    if step == ready_at and d.rank() == 0 then io.open(os.getenv("MULTINODE_HOLD") .. "/ready", "w"):close() end
    if step == fail_at and d.rank() == d.world_size() - 1 and os.getenv("TORCHELASTIC_RESTART_COUNT") == "0" then
      os.exit(3)
    end
  end })
for step = 1, #ref_losses do
  local got, want = result.losses[step], ref_losses[step]
  assert(math.abs(got - want) < 1e-5 * want, ("step %d: loss %.7f, one process on all rows %.7f"):format(step, got,
    want))
end
assert(ref_losses[steps] < ref_losses[1], "the loss falls")
if d.rank() == 0 then
  print(("multinode ok: losses %s (attempt %s)"):format(table.concat(result.losses, " "),
    os.getenv("TORCHELASTIC_RESTART_COUNT")))
end
-- MULTINODE_HOLD=DIR: rank 0 says it is done in DIR/ready, then every rank waits for DIR/stop
-- (the test reads the sockets the job holds meanwhile).
local hold = os.getenv("MULTINODE_HOLD")
if hold and hold ~= "" and not ready_at then
  if d.rank() == 0 then io.open(hold .. "/ready", "w"):close() end
  while not io.open(hold .. "/stop") do os.execute("sleep 0.1") end
  d.barrier()
end
