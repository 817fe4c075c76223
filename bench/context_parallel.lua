-- One row of bench/context_parallel: a LLaMA 64 wide (2 layers, 4 heads, 2 key/value heads) trained
-- on one row of SEQ tokens, whole in one process or split over the ranks by context_parallel
-- (METHOD: ring, the default, or all_to_all; load-balanced chunks). DOC: the row packed with
-- documents of DOC tokens each (position_ids starting again at 0, labels -100 at each start).
-- Prints, from rank 0:
--   row RANKS SEQ STEP_S PEAK_RSS_MIB_MAX PEAK_RSS_MIB_MIN LOSS METHOD DOC
--   slapo-lua run --nproc N bench/context_parallel.lua SEQ [METHOD] [DOC]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local seq = assert(tonumber(arg[1]), "usage: bench/context_parallel.lua SEQ [ring|all_to_all]")
local method = arg[2] or "ring"
local document = tonumber(arg[3])
local world, rank = slapo.dist.world_size(), slapo.dist.rank()

-- The process's peak resident memory (the kernel's high-water mark), in MiB.
local function peak_rss_mib()
  for line in io.lines("/proc/self/status") do
    local kib = line:match("^VmHWM:%s+(%d+) kB")
    if kib then return tonumber(kib) / 1024 end
  end
  error("context_parallel bench: no VmHWM in /proc/self/status")
end

local layout = world > 1 and require("slapo.parallel").layout({ cp = world }) or nil
slapo.manual_seed(0)
local model = slapo.models.llama({ hidden_size = 64, num_hidden_layers = 2, num_attention_heads = 4,
  num_key_value_heads = 2, intermediate_size = 256, vocab_size = 1024, max_position_embeddings = seq })
local sch = slapo.create_schedule(model)
if layout then sch:context_parallel({ group = layout.cp_group, method = method }) end
model = slapo.build(sch)
local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
slapo.manual_seed(1)
local ids = slapo.randint(0, 1024, { 1, seq })
local keywords = { labels = ids }
if document then  -- packed documents: each starts again at position 0 and trains no token to predict it
  assert(seq % document == 0, "DOC must divide SEQ")
  local copies = {}
  for i = 1, seq / document do copies[i] = slapo.arange(document) end
  local positions = slapo.cat(copies, 0):reshape({ 1, seq })
  keywords = { labels = (ids - (ids + 100) * positions:eq(0):long()):long(), position_ids = positions }
end

local seconds, loss = {}, nil
local steps = 3
for i = 1, steps do
  local start = slapo.clock()
  optimizer:zero_grad()
  local l = model(ids, keywords)
  l:backward()
  if layout then layout:all_reduce_grads(model) end
  optimizer:step()
  loss, seconds[i] = l:item(), slapo.clock() - start
  if rank == 0 then
    io.stderr:write(("  %d rank(s), seq %d%s: step %d/%d in %.2f s (ETA %.0f s)\n"):format(world, seq,
      layout and ", " .. method or "", i, steps, seconds[i], seconds[i] * (steps - i)))
  end
end
table.remove(seconds, 1)  -- the first step allocates
local peak = slapo.tensor({ peak_rss_mib() })
local peaks = world > 1 and slapo.dist.all_gather(peak):tolist() or peak:tolist()
if rank == 0 then
  print(("row %d %d %.3f %.0f %.0f %.4f %s %s"):format(world, seq, timing.median(seconds), math.max(unpack(peaks)),
    math.min(unpack(peaks)), loss, layout and method or "-", document or "-"))
end
