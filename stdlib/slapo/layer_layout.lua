--- The intra-op pass's layout of a module (the record slapo.autoshard returns, and each layer's in a
--- plan) written as the shard and sync calls a schedule makes. The C++ pass returns the record;
--- this file is the one place its calls are spelled.
---
---   local layout = require("slapo.layer_layout")
---   print(layout.calls(plan, "layer"))      -- one call per line, on the schedule variable `layer`
---   print(layout.autoshard_source(plan))    -- `return function(sch) ... end`, with the prediction
local M = {}

local function sorted_keys(map)
  local keys = {}
  for key in pairs(map) do keys[#keys + 1] = key end
  table.sort(keys)
  return keys
end

local function parent_of(path)
  return path:match("^(.*)%.[^.]*$") or ""
end

--- The calls of `layout` on the schedule variable `var`, one per line, two spaces in. With `below`
--- ("transformer.h.0"), only the leaves under that path, named relative to it.
function M.calls(layout, var, below)
  local prefix = (below and below ~= "") and below .. "." or ""
  local function under(path) return path:sub(1, #prefix) == prefix end
  local function relative(path) return path:sub(#prefix + 1) end
  local axis = layout.token_axis
  -- the tokens all-gathered; their gradient, a partial sum on each rank, reduce-scattered
  local gather = (':sync("fwd_pre", "all_gather", { axis = %d, grad = "reduce_scatter" })'):format(axis)
  local out = {}
  local function add(fmt, ...) out[#out + 1] = "  " .. fmt:format(...) .. "\n" end
  for _, path in ipairs(sorted_keys(layout.strategy)) do
    if under(path) then
      local style, name = layout.strategy[path], relative(path)
      local linear = layout.types[path] == "Linear"
      local column_dim, row_dim = linear and 0 or 1, linear and 1 or 0
      local groups = layout.groups[path]
      local opt = groups and (", { groups = %d }"):format(groups) or ""
      local bias = layout.has_bias[path] and (':shard("bias", 0%s)'):format(opt) or ""
      local input_grad = layout.parent_syncs[path] and "" or ':sync("bwd_post", "all_reduce")'
      if style == "column" then
        add('%s["%s"]:shard("weight", %d%s)%s%s', var, name, column_dim, opt, bias, input_grad)
      elseif style == "column_gather" then
        add('%s["%s"]:shard("weight", %d)%s:sync("fwd_post", "all_gather", { axis = -1 })%s', var, name, column_dim,
          bias, input_grad)
      elseif style == "row" then
        add('%s["%s"]:shard("weight", %d):sync("fwd_post", "all_reduce")', var, name, row_dim)
      elseif style == "column_seq" then  -- gathers the tokens first, unless its module does for all readers
        add('%s["%s"]:shard("weight", %d%s)%s%s', var, name, column_dim, opt, bias,
          layout.parent_gathers[path] and "" or gather)
      elseif style == "row_seq" then  -- its whole bias sees this rank's tokens: the bias's gradient is summed
        add('%s["%s"]:shard("weight", %d):sync("fwd_post", "reduce_scatter", { axis = %d })%s', var, name, row_dim, axis,
          layout.has_bias[path] and ':sync("bwd_params", "all_reduce", { params = { "bias" } })' or "")
      elseif style == "token_gather" then  -- every rank's queries see every token's keys
        add('%s["%s"]:sync("bwd_params", "all_reduce"):sync("fwd_post", "all_gather", { axis = %d, grad = '
          .. '"reduce_scatter" }) -- whole weights on this rank\'s tokens, its output gathered', var, name,
          layout.gather_axes[path] or axis)
      elseif style == "token_parallel" then
        add('%s["%s"]:sync("bwd_params", "all_reduce") -- whole weights on this rank\'s tokens', var, name)
      else
        add("-- %s stays replicated", name)
      end
    end
  end
  -- one input-gradient all-reduce for the column projections below each module that shares it
  local parents = {}
  for _, parent in pairs(layout.parent_syncs) do
    if under(parent) or parent .. "." == prefix then parents[parent] = true end
  end
  for _, parent in ipairs(sorted_keys(parents)) do
    if parent .. "." == prefix then
      add('%s:sync("bwd_post", "all_reduce")', var)
    else
      add('%s["%s"]:sync("bwd_post", "all_reduce")', var, relative(parent))
    end
  end
  -- one token all-gather for the column_seq projections below each
  local gathering = {}
  for _, parent in pairs(layout.parent_gathers) do
    if under(parent) then gathering[parent] = true end
  end
  for _, parent in ipairs(sorted_keys(gathering)) do add('%s["%s"]%s', var, relative(parent), gather) end
  -- norms on this rank's tokens: their gradients summed over the ranks
  local token_modules = {}
  for _, param in ipairs(layout.token_params) do
    if under(param) then
      local module = parent_of(param)
      token_modules[module] = token_modules[module] or {}
      table.insert(token_modules[module], param:sub(module == "" and 1 or #module + 2))
    end
  end
  for _, module in ipairs(sorted_keys(token_modules)) do
    if module .. "." == prefix or module == "" then  -- the module's own: by name, beside its sharded ones
      add('%s:sync("bwd_params", "all_reduce", { params = { "%s" } })', var, table.concat(token_modules[module], '", "'))
    else
      add('%s["%s"]:sync("bwd_params", "all_reduce")', var, relative(module))
    end
  end
  for _, path in ipairs(layout.forked) do  -- each rank's heads (or tokens) get their own dropout masks
    if under(path) then add('%s["%s"]:fork_rng()', var, relative(path)) end
  end
  return table.concat(out)
end

--- slapo.autoshard's source: the prediction in comments, then `return function(sch) ... end`, `sch`
--- being the module's schedule. Under sequence parallelism the module also splits its input's
--- tokens and gathers its output's.
function M.autoshard_source(layout)
  local out = {
    ("-- autoshard: %d projections and %d other ops chosen by the %s ILP (%d variables, %d constraints)\n"):format(
      layout.projections, layout.ops, layout.solver, layout.variables, layout.constraints),
    ("-- predicted %.6g s and %.1f MiB per device (all replicated: %.6g s, %.1f MiB)\n"):format(layout.step_s,
      layout.memory_mib, layout.replicated_s, layout.replicated_memory_mib),
  }
  if layout.zero then
    out[#out + 1] = "-- train with ZeRO-1: AdamW's moments sharded over the data-parallel ranks (zero_adamw)\n"
  end
  out[#out + 1] = "return function(sch)\n"
  if layout.sequence then  -- the module's callers hand it whole tensors and take whole ones back
    out[#out + 1] = ('  sch:sync("fwd_pre", "scatter", { axis = %d })\n'):format(layout.token_axis)
  end
  out[#out + 1] = M.calls(layout, "sch")
  if layout.sequence then
    out[#out + 1] = ('  sch:sync("fwd_post", "all_gather", { axis = %d })\n'):format(layout.token_axis)
  end
  out[#out + 1] = "end\n"
  return table.concat(out)
end

return M
