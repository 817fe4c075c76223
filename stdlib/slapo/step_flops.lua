--- The FLOPs one row of training computes (forward and backward), for slapo.train's TFLOP/s and
--- MFU, counted as MFU usually is (PaLM's): 6 per parameter a token passes through, and attention's
--- 12 x layers x width per token and position of its sequence; this rank's share of tensor
--- parallelism. Two families are counted by what they run, not by what they hold:
--- - ALBERT applies its shared groups num_hidden_layers / num_hidden_groups times each;
--- - T5's encoder reads the row, and its decoder and head the labels (under span corruption, a
---   shorter input and the dropped spans; else the row on both sides), its cross-attention every
---   decoder position against every encoder position;
--- - a mixture of experts (Mixtral) passes each token through num_experts_per_tok experts a layer,
---   whichever ranks hold them (shard_experts leaves a rank some of them).
local M = {}

local function config_of(model)
  local ok, config = pcall(slapo.models.config, model)
  return ok and type(config) == "table" and config or nil
end

-- A module's parameters, gathered where fully_shard sliced them.
local function params(module)
  return module:num_params({ gathered = true })
end

-- The parameters of the module at `path` (a list of names), or nil where the model has none there
-- (a family's model rebuilt by hand).
local function params_at(model, path)
  local ok, count = pcall(function()
    local module = model
    for _, name in ipairs(path) do module = module[name] end
    return params(module)
  end)
  return ok and count or nil
end

--- A function(seq) -> FLOPs of one row of `seq` token ids. `span_corruption`: slapo.train's
--- checked spec, or nil.
function M.per_row(model, tp_group, span_corruption)
  local config = config_of(model) or {}
  local ranks = tp_group and tp_group:size() or 1
  local all = params(model)
  local encoder, decoder = params_at(model, { "encoder", "block" }), params_at(model, { "decoder", "block" })
  local head = params_at(model, { "lm_head" })
  if config.model_type == "t5" and encoder and decoder and head then
    local width = config.num_heads * config.d_kv / ranks
    local encoder_layers = config.num_layers
    local decoder_layers = config.num_decoder_layers or encoder_layers
    return function(seq)
      local input, target = seq, seq
      if span_corruption then
        local _, _, i, t = require("slapo.span_corruption").lengths(seq, span_corruption)
        input, target = i, t
      end
      return 6 * (encoder * input + (decoder + head) * target) +
        12 * width * (encoder_layers * input * input + decoder_layers * (target * target + target * input))
    end
  end
  local groups = config.model_type == "albert" and params_at(model, { "albert", "encoder", "albert_layer_groups" })
  if groups then
    all = all + groups * (config.num_hidden_layers / config.num_hidden_groups - 1)
  end
  local parameters, attention = M.coefficients(config, all, config.n_layer or config.num_hidden_layers,
    model:named_parameters(), ranks)
  return function(seq)
    return (parameters + attention * seq) * seq
  end
end

--- A row's FLOPs over `seq` tokens are (parameters + attention x seq) x seq; returns the two: 6 per
--- parameter a token passes through (`all` of them, less the experts it skips), and attention's 12 x
--- `layers` x width, this rank's 1 / `ranks` of it. `named`: an iterator over the (name, parameter)
--- pairs counted in `all`, where this rank's experts are.
function M.coefficients(config, all, layers, named, ranks)
  local hidden = config.n_embd or config.hidden_size
  local attention = 0
  if type(layers) == "number" and type(hidden) == "number" then
    attention = 12 * layers * (config.inner_group_num or 1) * hidden / ranks
  end
  if config.num_local_experts and config.num_experts_per_tok and config.intermediate_size then
    local held = 0  -- the experts this rank holds, counted in `all`: a token runs k of them a layer
    for name, p in named do
      if name:find("%.experts%.%d+%.") then held = held + p:numel() end
    end
    all = all - held + layers * config.num_experts_per_tok * 3 * hidden * config.intermediate_size
  end
  return 6 * all, attention
end

--- A function(seq) -> this rank's FLOPs for one row of `seq` tokens in a pipeline: its stages' (their
--- parameters, a weight tied across stages counted by one of them, and their layers), added up over
--- the pipeline's ranks and shared equally, so each rank reports the pipeline's mean. Every rank of
--- the pipeline calls it, once (one all-reduce). `replicas`: on stage meshes, the replicas of this
--- rank's stage, which hold the same stage (each counts 1/replicas of it) and split its rows.
function M.pipeline_per_row(pipe, tp_group, replicas)
  local config = config_of(pipe.module) or {}
  local elsewhere, all = {}, pipe:num_params({ gathered = true })
  for _, name in ipairs(pipe:shared_counted_elsewhere()) do elsewhere[name] = true end
  for name, p in pipe:named_parameters() do
    if elsewhere[name] then all = all - p:numel() end
  end
  local layers = 0  -- a stage's layers are the leaves that are items of a layer list
  for _, leaf in ipairs(pipe:leaves()) do
    if leaf:find("%.%d+$") then layers = layers + 1 end
  end
  local parameters, attention = M.coefficients(config, all, layers, pipe:named_parameters(),
    tp_group and tp_group:size() or 1)
  replicas = replicas or 1
  local sums = slapo.tensor({ parameters / replicas, attention / replicas }, { dtype = "float64" })
  if pipe.group then slapo.dist.all_reduce(sums, pipe.group) end
  local ranks = pipe.group and pipe.group:size() or 1
  local v = sums:tolist()
  return function(seq)
    return (v[1] + v[2] * seq) * seq / ranks
  end
end

return M
