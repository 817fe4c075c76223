--- Rank layouts for tensor x data x pipeline parallelism, and data-parallel gradient averaging.
---
--- Example usage (4 ranks, TP = 2):
---   local layout = require("slapo.parallel").layout({ tp = 2 })
---   print(layout)          -- tp group {0, 1} (tp rank 0), dp group {0, 2} (dp rank 0)
---   local sch = slapo.create_schedule(model, { group = layout.tp_group })
---   ... loss:backward(); layout:all_reduce_grads(model); opt:step()
local M = {}
local util = require("slapo.util")

local Layout = {}
Layout.__index = Layout

-- Without the rank itself: the launcher marks every line of ranks other than 0 with "[rank k] ",
-- and rank 0's lines are the unmarked ones.
function Layout:__tostring()
  local s = ("tp group {%s} (tp rank %d), dp group {%s} (dp rank %d)"):format(
    table.concat(self.tp_ranks, ", "), self.tp_rank, table.concat(self.dp_ranks, ", "), self.dp_rank)
  if self.ep > 1 then
    s = s .. (", ep group {%s} (ep rank %d)"):format(table.concat(self.ep_ranks, ", "), self.ep_rank)
  end
  if self.cp > 1 then
    s = s .. (", cp group {%s} (cp rank %d)"):format(table.concat(self.cp_ranks, ", "), self.cp_rank)
  end
  if self.pp > 1 then
    s = s .. (", pp group {%s} (stage %d)"):format(table.concat(self.pp_ranks, ", "), self.pp_rank)
  end
  return s
end

local StageLayout = {}
StageLayout.__index = StageLayout

function StageLayout:__tostring()
  local meshes = {}
  for _, m in ipairs(self.meshes) do
    table.insert(meshes, ("%dx%d"):format(m.tp, m.dp))
  end
  return ("stage %d of meshes (tp x dp) %s, tp group {%s} (tp rank %d), dp group {%s} (dp rank %d)"):format(
    self.stage, table.concat(meshes, " "), table.concat(self.tp_ranks, ", "), self.tp_rank,
    table.concat(self.dp_ranks, ", "), self.dp_rank)
end

--- Bucketed data parallelism over this layout's DP group: dp = layout:data_parallel(model, {bucket_mb = 25});
--- loss:backward(); dp:finish(); opt:step(). Buckets start their all-reduce during backward.
function Layout:data_parallel(model, opts)
  opts = opts or {}
  return slapo.dist.data_parallel(model, { group = self.dp_group, bucket_mb = opts.bucket_mb,
    backward_passes = opts.backward_passes })
end

--- Averages gradients over the data-parallel group (after backward, before the optimizer step),
--- one all-reduce per parameter; data_parallel overlaps them with backward instead.
--- `model` is a module or a pipeline (whose parameters() are its stage's). `skip`, a set of
--- parameter names (a module's), leaves those out: fully_shard's backward averaged them already.
--- A module's experts (shard_experts over this layout's ep_group) are each rank's own: the block
--- averaged them over their ep group, and they are averaged here over the ranks holding the same
--- experts (expert_dp_group) alone.
function Layout:all_reduce_grads(model, skip)
  if self.dp == 1 then
    return
  end
  local function average(p, group, size)
    local g = p.grad
    if g then
      slapo.dist.all_reduce(g, group)
      g:mul_(1 / size)
    end
  end
  local experts = {}
  if (getmetatable(model) or {}).__name == "slapo.Module" then
    for _, name in ipairs(model:expert_parallel_parameters()) do experts[name] = true end
  end
  if skip or next(experts) then
    local expert_dp = self.ep > 1 and self.dp / self.ep or 1
    for name, p in model:named_parameters() do
      if skip and skip[name] then  -- averaged already (fully_shard's reduce-scatter; experts sharded so too)
      elseif experts[name] then
        if expert_dp > 1 then average(p, self.expert_dp_group, expert_dp) end
      else
        average(p, self.dp_group, self.dp)
      end
    end
  else
    for _, p in ipairs(model:parameters()) do
      average(p, self.dp_group, self.dp)
    end
  end
end

--- Cuts `stages` pipeline stages with equal numbers of layers from the layer list at
--- `layers_path` ("transformer.h"): on 8 layers and 2 stages, after layer 3.
function M.cut_evenly(sch, layers_path, stages)
  if type(layers_path) ~= "string" then
    error("parallel.cut_evenly: pass the path of the layer list, e.g. \"transformer.h\"", 2)
  end
  if getmetatable(sch) ~= debug.getregistry()["slapo.Schedule"] then
    error(("parallel.cut_evenly: the first argument must be a schedule (slapo.create_schedule(model)), got %s"):format(
      util.describe(sch)), 2)
  end
  util.check_count(stages, "the number of stages", "parallel.cut_evenly", 2)
  local layers = sch[layers_path]:children()
  if #layers < stages then
    error(("parallel.cut_evenly: %s has %d layers, too few for %d stages"):format(layers_path, #layers, stages), 2)
  end
  for s = 1, stages - 1 do
    layers[math.floor(s * #layers / stages)]:cut_pipeline_stage()
  end
end

--- Ranks 0..N-1 laid out as Megatron does: TP groups of consecutive ranks, then DP across them,
--- pipeline stages outermost. rank = (pp rank * dp + dp rank) * tp + tp rank, so TP = 2 on 4 ranks
--- gives TP {0,1} {2,3} and DP {0,2} {1,3}; TP = 2 x PP = 2 gives PP groups {0,2} {1,3}.
--- ep (expert parallelism, dividing dp) splits each DP group into groups of ep consecutive
--- replicas: shard_experts over ep_group spreads a MoE block's experts over them, and the ranks
--- holding the same experts form expert_dp_group (dp / ep of them). dp = 4, ep = 2 on 4 ranks: ep
--- groups {0,1} {2,3}, expert_dp groups {0,2} {1,3}.
--- cp (context parallelism, dividing dp) likewise makes groups of cp consecutive replicas that split
--- each sequence (sch:context_parallel{group = layout.cp_group}): they take the same rows, so the
--- rows split over dp / cp data replicas (`data_replicas`; this rank's is `data_replica`), and
--- gradients average over the whole DP group as before. dp = 4, cp = 2: cp groups {0,1} {2,3}.
--- Every rank must call this (it creates every group, in the same order).
function M.layout(opts)
  util.check_options(opts, { "tp", "dp", "pp", "ep", "cp" }, "parallel.layout", 2)
  opts = opts or {}
  for _, k in ipairs({ "tp", "dp", "pp", "ep", "cp" }) do
    if opts[k] ~= nil then
      util.check_count(opts[k], k, "parallel.layout", 2)
    end
  end
  local world, rank = slapo.dist.world_size(), slapo.dist.rank()
  local pp = opts.pp or 1
  if world % pp ~= 0 then
    error(("parallel.layout: pp = %s does not divide the world of %d ranks (choices: divisors of %d)"):format(
      tostring(pp), world, world), 2)
  end
  -- tp defaults to what dp leaves of a stage's ranks (all of them when dp is not given either,
  -- (with ep alone, none: experts spread over replicas)
  local tp = opts.tp or (opts.dp and (world / pp) / opts.dp) or ((opts.ep or opts.cp) and 1) or world / pp
  if tp < 1 or (world / pp) % tp ~= 0 then
    error(("parallel.layout: tp = %s does not divide the %d ranks of a pipeline stage (world %d / pp %d)"):format(
      tostring(tp), world / pp, world, pp), 2)
  end
  local dp = world / (tp * pp)
  if opts.dp and opts.dp ~= dp then
    error(("parallel.layout: tp %d x dp %d x pp %d is %d ranks; the world has %d"):format(tp, opts.dp, pp,
      tp * opts.dp * pp, world), 2)
  end
  -- Ranks of a node are consecutive and tp varies fastest, so a tp that divides the ranks per node
  -- keeps each tensor-parallel group inside a node (what the planner assumes); say so when it cannot.
  local per_node = slapo.dist.local_world_size()
  if per_node < world and per_node % tp ~= 0 and rank == 0 then
    io.stderr:write(("slapo-lua: warning: parallel.layout: tp = %d does not divide the %d ranks per node, so tensor-"
      .. "parallel groups cross nodes and their all-reduces the network (tp dividing %d keeps them inside a node)\n")
      :format(tp, per_node, per_node))
  end
  -- expert and context parallelism group data-parallel ranks: their sizes must divide dp
  local function groups_of_replicas(key, what)
    local n = opts[key] or 1
    if dp % n ~= 0 then
      local choices = {}
      for d = 1, dp do
        if dp % d == 0 then table.insert(choices, tostring(d)) end
      end
      error(("parallel.layout: %s = %d does not divide the %d data-parallel ranks (tp %d x dp %d x pp %d); %s groups "
        .. "are made of data-parallel replicas (choices: %s)"):format(key, n, dp, tp, dp, pp, what,
        table.concat(choices, ", ")), 3)
    end
    return n
  end
  local ep, cp = groups_of_replicas("ep", "expert"), groups_of_replicas("cp", "context-parallel")
  if cp > 1 and ep > 1 then
    error(("parallel.layout: cp = %d with ep = %d: context and expert parallelism together are not supported yet"):format(
      cp, ep), 2)
  end
  local layout = setmetatable({ rank = rank, world = world, tp = tp, dp = dp, pp = pp, ep = ep, cp = cp,
    data_replicas = dp / cp }, Layout)
  local function rank_of(t, d, p)
    return (p * dp + d) * tp + t
  end
  local me = { t = rank % tp, d = math.floor(rank / tp) % dp, p = math.floor(rank / (tp * dp)) }
  -- one group per combination of the other two coordinates, created in the same order everywhere
  local function make(kind, size, coords)
    for a = 0, coords[1] - 1 do
      for b = 0, coords[2] - 1 do
        local ranks = {}
        for i = 0, size - 1 do
          table.insert(ranks, coords.rank(a, b, i))
        end
        local group = slapo.dist.new_group(ranks)
        for i, r in ipairs(ranks) do
          if r == rank then
            layout[kind .. "_group"], layout[kind .. "_ranks"], layout[kind .. "_rank"] = group, ranks, i - 1
          end
        end
      end
    end
  end
  make("tp", tp, { dp, pp, rank = function(d, p, i) return rank_of(i, d, p) end })
  make("dp", dp, { tp, pp, rank = function(t, p, i) return rank_of(t, i, p) end })
  make("pp", pp, { tp, dp, rank = function(t, d, i) return rank_of(t, d, i) end })
  if ep > 1 then
    -- ep group: replicas block * ep .. block * ep + ep - 1; expert_dp: those at one place in each block
    make("ep", ep, { tp * pp, dp / ep, rank = function(tp_pp, block, i)
      return rank_of(tp_pp % tp, block * ep + i, math.floor(tp_pp / tp)) end })
    make("expert_dp", dp / ep, { tp * pp, ep, rank = function(tp_pp, place, i)
      return rank_of(tp_pp % tp, i * ep + place, math.floor(tp_pp / tp)) end })
  end
  if cp > 1 then  -- cp group: replicas block * cp .. block * cp + cp - 1
    make("cp", cp, { tp * pp, dp / cp, rank = function(tp_pp, block, i)
      return rank_of(tp_pp % tp, block * cp + i, math.floor(tp_pp / tp)) end })
  end
  layout.data_replica = math.floor(me.d / cp)
  assert(layout.tp_rank == me.t and layout.dp_rank == me.d and layout.pp_rank == me.p)
  return layout
end

-- A new group of `size` ranks, the i-th (from 0) being rank_at(i); returns it and its ranks.
local function stage_group(size, rank_at)
  local ranks = {}
  for i = 0, size - 1 do
    table.insert(ranks, rank_at(i))
  end
  return slapo.dist.new_group(ranks), ranks
end

--- Alpa's layout: each pipeline stage on a submesh of its own, `meshes` = {{tp =, dp =}, ...} in
--- stage order, taking the world's ranks in turn (rank = first rank of the stage + dp rank * tp + tp
--- rank). On 4 ranks {{tp = 2}, {dp = 2}} runs stage 0 tensor-parallel on ranks 0-1 and stage 1 as
--- two replicas on ranks 2 and 3. Every rank must call it. The result has this rank's stage, its
--- tp and dp groups, and `meshes` for slapo.build's pipeline = {meshes = layout.meshes, ...}.
function M.stage_layout(meshes)
  local world, rank = slapo.dist.world_size(), slapo.dist.rank()
  if type(meshes) ~= "table" or #meshes < 2 then
    error("parallel.stage_layout: pass two stage meshes or more, e.g. {{tp = 2}, {dp = 2}}", 2)
  end
  local total, out = 0, {}
  for i, m in ipairs(meshes) do
    if type(m) ~= "table" then
      error(("parallel.stage_layout: mesh %d must be a table {tp =, dp =}, got %s"):format(i, type(m)), 2)
    end
    for key in pairs(m) do
      if key ~= "tp" and key ~= "dp" then
        error(("parallel.stage_layout: mesh %d has an unknown field '%s' (valid: tp, dp)"):format(i, tostring(key)), 2)
      end
    end
    local tp, dp = m.tp or 1, m.dp or 1
    for key, v in pairs({ tp = tp, dp = dp }) do
      if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
        error(("parallel.stage_layout: mesh %d's %s = %s must be a whole number of ranks, at least 1"):format(i, key,
          tostring(v)), 2)
      end
    end
    out[i] = { tp = tp, dp = dp, first = total }
    total = total + tp * dp
  end
  if total ~= world then
    error(("parallel.stage_layout: the meshes hold %d ranks, but the world has %d"):format(total, world), 2)
  end
  local layout = setmetatable({ rank = rank, world = world, pp = #out, meshes = {} }, StageLayout)
  for s, m in ipairs(out) do  -- every stage's groups, created in the same order on every rank
    layout.meshes[s] = { tp = m.tp, dp = m.dp }
    local mine = rank >= m.first and rank < m.first + m.tp * m.dp
    if mine then
      layout.stage, layout.tp, layout.dp = s - 1, m.tp, m.dp
      layout.tp_rank, layout.dp_rank = (rank - m.first) % m.tp, math.floor((rank - m.first) / m.tp)
    end
    -- a tp group per replica, then a dp group per tp rank
    for d = 0, m.dp - 1 do
      local group, ranks = stage_group(m.tp, function(t) return m.first + d * m.tp + t end)
      if mine and d == layout.dp_rank then
        layout.tp_group, layout.tp_ranks = group, ranks
      end
    end
    for t = 0, m.tp - 1 do
      local group, ranks = stage_group(m.dp, function(d) return m.first + d * m.tp + t end)
      if mine and t == layout.tp_rank then
        layout.dp_group, layout.dp_ranks = group, ranks
      end
    end
  end
  return layout
end

return M
