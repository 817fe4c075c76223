-- A tiny GPT-2 trained by slapo.train on the same 4 rows for any number of ranks, on the layout
-- arg[1] names: "fully" (fully sharded over every rank), "tp" (TP over every rank), "2d" (TP 2
-- inside, fully sharded across), "whole" (each rank the whole model, on all rows). arg[2]: the
-- steps; arg[3]: the checkpoint directory (a checkpoint every 3 steps); arg[4]: a checkpoint to
-- resume from, if any. Rank 0 prints "losses <step>=<loss> ..." with full precision.
local layout_name, steps, dir, resume = arg[1], tonumber(arg[2]), arg[3], arg[4]
local world = slapo.dist.world_size()

slapo.manual_seed(3)
-- 66 tokens and 15 positions: rows the ranks do not divide evenly (fully sharded on 4: 17 x 3 + 15 and
-- 4 x 3 + 3; 2-D: 33 and 15 rows over 2 data-parallel ranks), whose pieces differ in length
local model = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 66, n_positions = 15,
  resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
slapo.manual_seed(4)
local all = slapo.randint(0, 64, { 4, 8 })

local layout, group
local sch = slapo.create_schedule(model)
local function fully_shard(over)
  for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard({ group = over }) end
  sch:fully_shard({ group = over })
end
if layout_name == "fully" then
  layout = require("slapo.parallel").layout({ tp = 1 })
  fully_shard(layout.dp_group)
elseif layout_name == "tp" then
  layout = require("slapo.parallel").layout({ tp = world })
  sch = slapo.create_schedule(model, { group = layout.tp_group })
  require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
elseif layout_name == "2d" then
  layout = require("slapo.parallel").layout({ tp = 2 })
  sch = slapo.create_schedule(model, { group = layout.tp_group })
  require("slapo.schedules.gpt2").schedule(sch, { fork_rng = false })
  fully_shard(layout.dp_group)
else
  assert(layout_name == "whole", "layout: fully, tp, 2d or whole")
end
local replicas, replica = layout and layout.dp or 1, layout and layout.dp_rank or 0
local rows = all:narrow(0, replica * 4 / replicas, 4 / replicas)
local result = slapo.train({ model = sch.mod, steps = steps, lr = 1e-2, schedule = "constant", clip = 0.5,
  quiet = true, layout = layout, data = function() return rows end, checkpoint_dir = dir, checkpoint_every = 3,
  resume = resume or false })
if slapo.dist.rank() == 0 then
  local out = {}
  for step = result.first_step, steps do table.insert(out, ("%d=%.9g"):format(step, result.losses[step])) end
  print("losses " .. table.concat(out, " "))
end
