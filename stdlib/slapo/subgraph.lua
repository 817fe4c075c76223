--- Choosing subgraphs of a traced module by dataflow, for replace / checkpoint / fuse.
---
--- Example usage:
---   local core = require("slapo.subgraph").between(sub:graph(), "%39", "%54")
---   sub:replace(function(k, q, v) return slapo.kernels.attention(q, k, v) end, core)
local M = {}

local function node_name(n)
  return type(n) == "table" and n.name or n
end

-- What a wrong argument was, in the words of the message: a schedule is a common slip for its graph.
local function describe(value)
  if type(value) == "userdata" and (getmetatable(value) or {}).__name == "slapo.Schedule" then
    return "a schedule (its graph is sub:graph())"
  end
  if type(value) == "table" then
    return "a table without nodes"
  end
  return type(value)
end

-- The argument checks: each names the function, the argument and what it takes. Level 3 blames
-- the caller of the public function.
local function check_graph(fn, graph)
  if type(graph) ~= "table" or type(graph.nodes) ~= "table" then
    error(("subgraph.%s: bad argument #1 'graph': a traced graph (sub:graph()) expected, got %s"):format(fn,
      describe(graph)), 3)
  end
end

local function check_node(fn, position, argument, value)
  if type(node_name(value)) ~= "string" then
    error(("subgraph.%s: bad argument #%d '%s': a node of the graph or its name (\"%%39\") expected, got %s"):format(
      fn, position, argument, type(value)), 3)
  end
end

local function check_op(fn, position, argument, value, optional)
  if type(value) ~= "string" and not (optional and value == nil) then
    error(("subgraph.%s: bad argument #%d '%s': an op name (\"aten::matmul\") expected, got %s"):format(fn,
      position, argument, type(value)), 3)
  end
end

--- The nodes on a dataflow path from node `from` to node `to` (both included), in graph order:
--- everything `to` computes from `from`'s result, without what it takes from elsewhere.
--- `graph` is sub:graph(); `from` and `to` are nodes or their names ("%39").
function M.between(graph, from, to)
  check_graph("between", graph)
  check_node("between", 2, "from", from)
  check_node("between", 3, "to", to)
  from, to = node_name(from), node_name(to)
  local by_name = {}
  for _, n in ipairs(graph.nodes) do
    by_name[n.name] = n
  end
  for _, name in ipairs({ from, to }) do
    if not by_name[name] then
      error(("subgraph.between: no node %s in the graph (sub:graph() lists them)"):format(tostring(name)), 2)
    end
  end
  local downstream, upstream = { [from] = true }, { [to] = true }
  for _, n in ipairs(graph.nodes) do  -- graph order: a node's inputs come before it
    for _, input in ipairs(n.inputs) do
      if downstream[input] then
        downstream[n.name] = true
      end
    end
  end
  for i = #graph.nodes, 1, -1 do
    local n = graph.nodes[i]
    if upstream[n.name] then
      for _, input in ipairs(n.inputs) do
        upstream[input] = true
      end
    end
  end
  if not downstream[to] then
    error(("subgraph.between: %s does not use the result of %s"):format(to, from), 2)
  end
  local out = {}
  for _, n in ipairs(graph.nodes) do
    if downstream[n.name] and upstream[n.name] then
      table.insert(out, n)
    end
  end
  return out
end

--- The first node of `graph` whose op is `op` and, if given, whose user list holds a node of op
--- `used_by` (find the transpose feeding a matmul: first(g, "aten::transpose", "aten::matmul")).
function M.first(graph, op, used_by)
  check_graph("first", graph)
  check_op("first", 2, "op", op)
  check_op("first", 3, "used_by", used_by, true)
  local ops = {}
  for _, n in ipairs(graph.nodes) do
    ops[n.name] = n.op
  end
  for _, n in ipairs(graph.nodes) do
    if n.op == op then
      local ok = used_by == nil
      for _, user in ipairs(n.users) do
        ok = ok or ops[user] == used_by
      end
      if ok then
        return n
      end
    end
  end
  error(("subgraph.first: no %s node%s"):format(op, used_by and (" used by " .. used_by) or ""), 2)
end

--- The last node of `graph` whose op is `op`.
function M.last(graph, op)
  check_graph("last", graph)
  check_op("last", 2, "op", op)
  for i = #graph.nodes, 1, -1 do
    if graph.nodes[i].op == op then
      return graph.nodes[i]
    end
  end
  error(("subgraph.last: no %s node"):format(op), 2)
end

return M
