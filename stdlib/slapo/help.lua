--- slapo.help(name) and slapo.list_primitives(): one paragraph per primitive, as in docs/primitives.md.
local M = {}

M.primitives = {
  replace = "sub:replace(new_module): put another module with the same call signature in this slot; "
    .. "sub:replace(module_or_fn, subgraph, {check = true}) on a traced module: a new child runs in the "
    .. "subgraph's place, fed its inputs in order of first use (checked on random inputs).",
  replace_all = "sch:replace_all(type_name, make_fn): replace every descendant of a type with make_fn(path, module).",
  shard = "sub:shard(param, axis, {groups = n}): keep this rank's slice of a parameter along axis; "
    .. "groups splits each of n fused sections (QKV) alike.",
  sync = "sub:sync(mode, op, {axis = n}): differentiable collective; mode fwd_pre | fwd_post | bwd_post | bwd_params (parameter gradients); "
    .. "op all_reduce | all_gather | reduce_scatter | scatter | \"RS->SR\"-style reshard | a Lua function.",
  checkpoint = "sub:checkpoint(): recompute the module in backward, random states restored (bit-identical gradients); "
    .. "sub:checkpoint(subgraph): the same for a subgraph of a traced module (CheckPointWrapper_n).",
  fork_rng = "sub:fork_rng([seed]): the module draws random numbers from its own per-rank stream.",
  fully_shard = "sub:fully_shard{reshard_after_forward = true}: each rank keeps 1/N of the subtree's parameters "
    .. "(their gradients and optimizer state too); calls gather them, backward reduce-scatters the averaged "
    .. "gradient; with reshard_after_forward the gathered parameters are freed until backward gathers them again.",
  annotate = "sub:annotate(param, key, value): attach metadata to a parameter (see sub:param_info(param)).",
  trace = "sub:trace{inputs = {...}, leaves = {...}, flatten = false}: the module's forward becomes a graph; "
    .. "leaves (direct children, or with flatten the named paths/types) stay calls; see sub:graph().",
  find = "sub:find(regex | function): on a traced module, the call nodes whose leaf path matches, or the "
    .. "subgraphs matching a traced Lua function by dataflow.",
  fuse = "sub:fuse(nil, {compiler = \"kernels\"}): on a traced module, rewrite matmul -> bias add -> gelu into "
    .. "slapo::bias_gelu; sub:fuse(subgraph, {compiler = \"kernels\" | \"torchscript\", name = \"BiasGeLU\"}): "
    .. "the chosen subgraph becomes child BiasGeLU_n.",
  decompose = "sub:decompose(): a Linear/Conv1D computes matmul and bias add separately, so a trace can fuse the bias.",
  cut_pipeline_stage = "sub:cut_pipeline_stage(): a pipeline stage ends after this module; slapo.build(sch, "
    .. "{pipeline = {group =, micro_batches =, schedule = \"1f1b\" | \"gpipe\"}}) then returns a pipeline: "
    .. "pipe:step(ids, {labels = ids}) runs forward and backward of every micro-batch; cutting v times as many "
    .. "stages as ranks interleaves v chunks per rank.",
}

function M.list()
  local names = {}
  for name in pairs(M.primitives) do
    table.insert(names, name)
  end
  table.sort(names)
  return names
end

function M.help(name)
  if name == nil then
    return "primitives: " .. table.concat(M.list(), ", ") .. "\nslapo.help(\"shard\") describes one; see docs/primitives.md"
  end
  local text = M.primitives[name]
  if not text then
    error(("help: no primitive '%s' (primitives: %s)"):format(tostring(name), table.concat(M.list(), ", ")), 2)
  end
  return text
end

return M
