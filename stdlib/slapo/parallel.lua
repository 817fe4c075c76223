--- Rank layouts for tensor x data parallelism, and data-parallel gradient averaging.
---
--- Example usage (4 ranks, TP = 2):
---   local layout = require("slapo.parallel").layout({ tp = 2 })
---   print(layout)          -- rank 0: tp group {0, 1} (tp rank 0), dp group {0, 2} (dp rank 0)
---   local sch = slapo.create_schedule(model, { group = layout.tp_group })
---   ... loss:backward(); layout:all_reduce_grads(model); opt:step()
local M = {}

local Layout = {}
Layout.__index = Layout

function Layout:__tostring()
  return ("rank %d: tp group {%s} (tp rank %d), dp group {%s} (dp rank %d)"):format(self.rank,
    table.concat(self.tp_ranks, ", "), self.tp_rank, table.concat(self.dp_ranks, ", "), self.dp_rank)
end

--- Averages gradients over the data-parallel group (after backward, before the optimizer step).
function Layout:all_reduce_grads(model)
  if self.dp == 1 then
    return
  end
  for _, p in ipairs(model:parameters()) do
    local g = p.grad
    if g then
      slapo.dist.all_reduce(g, self.dp_group)
      g:mul_(1 / self.dp)
    end
  end
end

--- Ranks 0..N-1 form TP groups of consecutive ranks and DP groups across them:
--- TP = 2 on 4 ranks gives TP {0,1} {2,3} and DP {0,2} {1,3}. Every rank must call this.
function M.layout(opts)
  opts = opts or {}
  local world, rank = slapo.dist.world_size(), slapo.dist.rank()
  local tp = opts.tp or world
  if type(tp) ~= "number" or tp < 1 or world % tp ~= 0 then
    error(("parallel.layout: tp = %s does not divide the world of %d ranks (choices: divisors of %d)"):format(
      tostring(tp), world, world), 2)
  end
  local dp = world / tp
  local layout = setmetatable({ rank = rank, world = world, tp = tp, dp = dp }, Layout)
  -- every rank creates every group, in the same order (as torch.distributed.new_group requires)
  for first = 0, world - 1, tp do
    local ranks = {}
    for r = first, first + tp - 1 do
      table.insert(ranks, r)
    end
    local group = slapo.dist.new_group(ranks)
    if rank >= first and rank < first + tp then
      layout.tp_group, layout.tp_ranks, layout.tp_rank = group, ranks, rank - first
    end
  end
  for offset = 0, tp - 1 do
    local ranks = {}
    for r = offset, world - 1, tp do
      table.insert(ranks, r)
    end
    local group = slapo.dist.new_group(ranks)
    if rank % tp == offset then
      layout.dp_group, layout.dp_ranks, layout.dp_rank = group, ranks, (rank - offset) / tp
    end
  end
  return layout
end

return M
