--- slapo.help(name) and slapo.list_primitives(): one paragraph per primitive, as in docs/primitives.md,
--- and per function a script calls around them (docs/lua-api.md).
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
    .. "sub:checkpoint(subgraph): the same for a subgraph of a traced module (CheckPointWrapper_n, which holds the leaves it calls: CheckPointWrapper_0.layer1).",
  fork_rng = "sub:fork_rng([seed]): the module draws random numbers from its own per-rank stream.",
  fully_shard = "sub:fully_shard{reshard_after_forward = true, prefetch = true, overlap_reduce = true, group = dp_group}: "
    .. "each rank keeps 1/N of the subtree's parameters (their gradients and optimizer state too); calls gather "
    .. "them, backward reduce-scatters the averaged gradient (overlap_reduce: while the next unit's backward "
    .. "computes); with reshard_after_forward the gathered parameters are freed until backward gathers them again; "
    .. "group = layout.dp_group fully shards across data-parallel ranks what shard split over tensor-parallel ones.",
  shard_experts = "sub:shard_experts{group = ep_group}: on a sparse MoE block (Mixtral's block_sparse_moe), keep "
    .. "num_local_experts / |group| of its experts on each rank of the group; each call sends every routed token to "
    .. "its experts' ranks and back by all-to-all (none dropped), the router stays whole; with "
    .. "slapo.parallel.layout{ep = N}, group = layout.ep_group.",
  context_parallel = "sch:context_parallel{group = cp_group, method = \"ring\", load_balance = true, score_mib = 32}: "
    .. "on a GPT-2 or LLaMA-"
    .. "family model's root, each rank of the group keeps its share of every sequence (load_balance: chunks r and "
    .. "2N-1-r of 2N) and attends over every rank's keys by ring attention (method \"all_to_all\": DeepSpeed-"
    .. "Ulysses, every rank's tokens of 1/N of the heads by all-to-all; the heads must divide); it returns its "
    .. "tokens' logits, or the whole sequence's loss; average gradients over the group (slapo.parallel.layout{cp = N}, slapo.train).",
  annotate = "sub:annotate(param, key, value): attach metadata to a parameter (see sub:param_info(param)).",
  trace = "sub:trace{inputs = {...}, leaves = {...}, flatten = false}: the module's forward becomes a graph; "
    .. "leaves (direct children, or with flatten the named paths/types) stay calls; see sub:graph(). "
    .. "recursive = true traces blocks below too; fallback = true keeps a block it cannot trace as a call.",
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

-- The functions a schedule script calls around the primitives (docs/lua-api.md has them all).
M.functions = {
  create_schedule = "slapo.create_schedule(model, {group = g}): the schedule tree of a model; sch[\"path\"] is a "
    .. "sub-schedule, sch.mod its module. group: the ranks shard and sync work over (default: the world).",
  build = "slapo.build(sch, {init_weights =, seed =, pipeline = {group =, micro_batches =, schedule =}}): the "
    .. "scheduled model to run and train; with cut_pipeline_stage cuts and pipeline options, a pipeline.",
  verify = "slapo.verify(sch, inputs, {rtol =, atol =, backward = true, pipeline =}, fn): apply fn(sch) and compare "
    .. "outputs and gradients with the model before it; a mismatch rolls fn's primitives back.",
  train = "slapo.train{model =, data =, steps =, lr =, optimizer =, grad_accum =, clip =, autocast =, "
    .. "checkpoint_dir =, ...}: the training loop of a module or a pipeline (docs/lua-api.md lists every option).",
  autoshard = "slapo.autoshard(sch, {ranks =, dp =, batch =, seq =, memory_mib =, zero =}): the planner's intra-op "
    .. "pass (Alpa's ILP) on a layer or a model: which projections go column- or row-parallel, as a Lua schedule "
    .. "(p.source; p:apply(layer)). `slapo-lua plan` writes a whole plan as a script (docs/planner.md).",
  plan = "slapo.plan(model | sch, {cluster = \"1x8:h100\", batch =, seq =, steps =, dtype =, max_stages =, pick =, "
    .. "layer_costs =, pin = {tp =, dp =, stages = {8, 4}, checkpoint =, zero =, fully_shard =, ...}}): the planner's "
    .. "fastest plan and its script (p.source); given a schedule, its stage cuts, layer checkpoints, shard and "
    .. "fully_shard calls are kept (pins) and p.unpinned says what they cost (docs/planner.md).",
  save = "slapo.save(model_or_pipeline, dir, {max_shard_size = bytes}): a Hugging Face checkpoint "
    .. "(config.json and safetensors), gathered once from sharded ranks.",
  from_pretrained = "slapo.models.from_pretrained(dir, {dtype =, device = \"meta\"}): a Hugging Face "
    .. "checkpoint's model; on meta, slapo.build reads each rank's slices only.",
  tokenizer = "slapo.tokenizer(dir_or_file): a checkpoint's tokenizer (tokenizer.json of a byte-level BPE, or "
    .. "GPT-2's encoder.json + vocab.bpe): tok:encode(text) -> ids, tok:decode(ids), tok.vocab_size, bos_id, eos_id.",
  token_file = "slapo.token_file(path): a corpus slapo-lua tokenize wrote, mapped: f.tokens, f.documents, "
    .. "f:document(i), f:batch{step =, batch =, seq =, rank =, ranks =, seed =} -> this rank's rows of the step.",
}

local function sorted_keys(t)
  local names = {}
  for name in pairs(t) do
    table.insert(names, name)
  end
  table.sort(names)
  return names
end

function M.list()
  return sorted_keys(M.primitives)
end

local function function_names()
  return sorted_keys(M.functions)
end

function M.help(name)
  if name == nil then
    return "primitives: " .. table.concat(M.list(), ", ") .. "\nfunctions: " .. table.concat(function_names(), ", ")
      .. "\nslapo.help(\"shard\") describes one; see docs/primitives.md and docs/lua-api.md"
  end
  local text = M.primitives[name] or M.functions[name]
  if not text then
    local all = M.list()
    for _, f in ipairs(function_names()) do
      table.insert(all, f)
    end
    local close = type(name) == "string" and slapo._closest_names(name, all) or {}
    -- a name not found, not a fault: reported without a traceback through this file
    require("slapo.util").usage_error(("help: no primitive or function '%s'%s (primitives: %s; functions: %s)"):format(
      tostring(name), #close > 0 and (", did you mean '" .. close[1] .. "'?") or "", table.concat(M.list(), ", "),
      table.concat(function_names(), ", ")), 2)
  end
  return text
end

return M
