-- The pipeline bubble: GPT-2 (n_embd 256, 8 layers) cut into 2 stages, one per rank, with 1 to 16
-- micro-batches per step under GPipe and 1F1B, and into 4 stages, 2 chunks per rank, under
-- interleaved 1F1B. The measured bubble is the part of a step a stage
-- spends waiting (1 - compute time / step time, averaged over the stages), next to the ideal
-- (p - 1) / (m + p - 1) of equal stages and free messages. Rank 0 prints one table.
--   slapo-lua run --nproc 2 bench/pipeline_bubble.lua
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local parallel = require("slapo.parallel")

local layout = parallel.layout({ pp = 2 })
local rows, seq = 16, 64
slapo.manual_seed(0)
local ids = slapo.randint(0, 1024, { rows, seq })

local function measure(schedule, m, chunks)
  slapo.manual_seed(0)
  local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 256, n_layer = 8, n_head = 8, vocab_size = 1024,
    n_positions = seq, resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 }), { group = layout.tp_group })
  parallel.cut_evenly(sch, "transformer.h", 2 * chunks)
  local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, schedule = schedule, micro_batches = m } })
  local bubbles, busy = {}, { {}, {} }
  local seconds = timing.time(function()
    pipe:step(ids, { labels = ids })
    local stats = slapo.dist.all_gather(slapo.tensor({ pipe:stats().bubble, pipe:stats().busy_s }), 0, layout.pp_group)
      :tolist()
    table.insert(bubbles, (stats[1] + stats[3]) / 2)
    table.insert(busy[1], stats[2])
    table.insert(busy[2], stats[4])
  end, 1, 5)
  table.remove(bubbles, 1)  -- the warm-up step
  return seconds, timing.median(bubbles), pipe:stats().ideal_bubble, timing.median(busy[1]), timing.median(busy[2])
end

local out = {}
for _, case in ipairs({ { "gpipe", 1 }, { "1f1b", 1 }, { "1f1b", 2 } }) do
  local schedule, chunks = case[1], case[2]
  for _, m in ipairs({ 1, 2, 4, 8, 16 }) do
    if chunks == 1 or m % 2 == 0 then
      local seconds, bubble, ideal, busy0, busy1 = measure(schedule, m, chunks)
      local name = chunks > 1 and ("interleaved 1f1b (%d chunks)"):format(chunks) or schedule
      table.insert(out, ("| %s | %d | %.3f s | %.3f / %.3f s | %.2f | %.2f |"):format(name, m, seconds, busy0, busy1,
        bubble, ideal))
    end
  end
end
if slapo.dist.rank() == 0 then
  print("| schedule | micro-batches | median step | compute, rank 0 / 1 | measured bubble | ideal (p-1)/(vm+p-1) |")
  print("|---|---|---|---|---|---|")
  print(table.concat(out, "\n"))
end
