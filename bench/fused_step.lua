-- A reference schedule with fuse = true (the kernels slapo.kernel_choices picks for the device)
-- against the same model unfused: training-step time, the two alternating step by step, ratio =
-- median of the per-round ratios. fuse = "all" is timed too, to show what the choice avoids.
--   slapo-lua run bench/fused_step.lua [device] [rounds]
package.path = "bench/?.lua;" .. package.path
local timing = require("timing")
local device, rounds = arg[1] or "cpu", tonumber(arg[2] or 5)
local sync = device:match("^cuda") and slapo.cuda.synchronize or function() end

local configs = {
  bert = { hidden_size = 256, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 1024,
    vocab_size = 8192 },
  gpt2 = { n_embd = 256, n_layer = 2, n_head = 4, vocab_size = 8192, attn_pdrop = 0 },
  llama = { hidden_size = 256, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 688,
    vocab_size = 8192 },
}

local function trainer(kind, fuse)
  slapo.manual_seed(0)
  local model = slapo.models[kind](configs[kind])
  local notes = {}
  if fuse then
    local sch = slapo.create_schedule(model)
    notes = require("slapo.schedules." .. kind).schedule(sch, { fuse = fuse, device = device })
    model = slapo.build(sch)
  end
  model:to(device)
  local opt = slapo.optim.adamw(model, { lr = 1e-4 })
  local ids = slapo.randint(0, 8192, { 8, 128 }):to(device)
  return function()
    opt:zero_grad()
    model(ids, { labels = ids }):backward()
    opt:step()
    sync()
  end, notes
end

print(("| model (8 x 128 tokens, 2 layers, width 256) on %s | unfused | fuse = true | ratio | fuse = \"all\" | ratio | "
  .. "left out by fuse = true |"):format(device))
print("|---|---|---|---|---|---|---|")
for _, kind in ipairs({ "bert", "gpt2", "llama" }) do
  local plain, chosen, all = trainer(kind, false), trainer(kind, true), trainer(kind, "all")
  local _, notes = trainer(kind, true)
  for _, fn in ipairs({ plain, chosen, all }) do fn() end
  local t = { {}, {}, {} }
  local r_chosen, r_all = {}, {}
  for r = 1, rounds do
    for i, fn in ipairs({ plain, chosen, all }) do
      local start = slapo.clock()
      fn()
      t[i][r] = slapo.clock() - start
    end
    r_chosen[r], r_all[r] = t[2][r] / t[1][r], t[3][r] / t[1][r]
  end
  local left = {}
  for _, n in ipairs(notes) do left[#left + 1] = n:match("^(%S+):") or n end
  print(("| %s | %.3f s | %.3f s | %.2f | %.3f s | %.2f | %s |"):format(kind, timing.median(t[1]), timing.median(t[2]),
    timing.median(r_chosen), timing.median(t[3]), timing.median(r_all), #left > 0 and table.concat(left, ", ") or "-"))
end
