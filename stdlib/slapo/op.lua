--- slapo.op: ready-made replacement modules built on the fused kernels (Slapo's op library).
--- Each takes the module it replaces and shares its parameters, so a replace keeps the weights.
---
--- Example usage:
---   for _, layer in ipairs(sch["model.layers"]:children()) do
---     layer["mlp"]:replace(slapo.op.FusedLlamaMLP(layer["mlp"].mod))
---     layer["input_layernorm"]:replace(slapo.op.FusedRMSNorm(layer["input_layernorm"].mod))
---   end
local M = {}

-- zeros(shape) on `like`'s device and dtype, made once per device and dtype: the fused kernels
-- refuse helper tensors that live elsewhere than the activations.
local function zeros_cache(shape)
  local made = {}
  return function(like)
    local key = like:device() .. "/" .. like:dtype()
    made[key] = made[key] or slapo.zeros(shape, { device = like:device(), dtype = like:dtype() })
    return made[key]
  end
end

-- `wanted`: a type name, or a list of them (Qwen2's LLaMA-shaped classes share the replacements)
local function expect_type(module, wanted, fn)
  local names = type(wanted) == "table" and wanted or { wanted }
  for _, name in ipairs(names) do
    if module:type() == name then
      return
    end
  end
  error(("op.%s: expected a %s to replace, got %s"):format(fn, table.concat(names, " or "), module:type()), 3)
end

--- LlamaMLP with silu(gate) * up in one fused kernel.
function M.FusedLlamaMLP(mlp)
  expect_type(mlp, { "LlamaMLP", "Qwen2MLP", "MistralMLP" }, "FusedLlamaMLP")
  return slapo.nn.Module({
    type = "FusedLlamaMLP",
    children = { gate_proj = mlp.gate_proj, up_proj = mlp.up_proj, down_proj = mlp.down_proj },
    forward = function(self, x)
      return self.down_proj(slapo.kernels.swiglu(self.gate_proj(x), self.up_proj(x)))
    end,
  })
end

--- LlamaRMSNorm as one fused kernel (statistics in double precision); eps defaults to the
--- replaced norm's own.
function M.FusedRMSNorm(norm, eps)
  expect_type(norm, { "LlamaRMSNorm", "Qwen2RMSNorm", "MistralRMSNorm", "MixtralRMSNorm" }, "FusedRMSNorm")
  eps = eps or tonumber(norm:describe():match("eps=([%d%.e%-+]+)"))
  return slapo.nn.Module({
    type = "FusedRMSNorm",
    params = { weight = norm.weight },
    forward = function(self, x)
      return slapo.kernels.rms_norm(x, self.weight, eps or 1e-6)
    end,
  })
end

-- The bias_gelu approximation of a GPT-2 MLP's activation module (config.activation_function).
local gelu_of_activation = { GELUActivation = "none", NewGELUActivation = "tanh", PytorchGELUTanh = "tanh" }

--- GPT-2's MLP with the c_fc bias add and its GELU fused (exact or tanh, as the model's
--- activation_function says; other activations are refused).
function M.FusedGPT2MLP(mlp)
  expect_type(mlp, "GPT2MLP", "FusedGPT2MLP")
  local approximate = gelu_of_activation[mlp.act:type()]
  if not approximate then
    error(("op.FusedGPT2MLP: the MLP's activation is %s; the fused kernel is bias + GELU (activation_function "
      .. "gelu, gelu_new or gelu_pytorch_tanh)"):format(mlp.act:type()), 2)
  end
  return slapo.nn.Module({
    type = "FusedGPT2MLP",
    children = { c_fc = mlp.c_fc, c_proj = mlp.c_proj, dropout = mlp.dropout },
    forward = function(self, x)
      local w = self.c_fc.weight  -- Conv1D stores [in, out]
      local shape = x:size()
      local h = x:reshape({ -1, shape[#shape] }):matmul(w)
      h = slapo.kernels.bias_gelu(h, self.c_fc.bias, { approximate = approximate })
      shape[#shape] = w:size(1)
      return self.dropout(self.c_proj(h:view(shape)))
    end,
  })
end

--- BertSelfAttention with scale, mask and softmax in one kernel (slapo.kernels.masked_softmax).
--- It shares query, key, value and dropout with the module it replaces; the head count follows
--- query's width, so on a tensor-parallel shard it runs this rank's heads.
function M.FusedQKVAttention(attn)
  expect_type(attn, "BertSelfAttention", "FusedQKVAttention")
  local head_dim = tonumber(attn:describe():match("head_dim=(%d+)"))
  local no_mask = zeros_cache({ 1 })
  return slapo.nn.Module({
    type = "FusedQKVAttention",
    children = { query = attn.query, key = attn.key, value = attn.value, dropout = attn.dropout },
    forward = function(self, x, mask)
      local b, s = x:size(0), x:size(1)
      local function heads(t)
        return t:view({ b, s, -1, head_dim }):transpose(1, 2)
      end
      local q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
      local scores = q:matmul(k:transpose(-1, -2))
      local probs = slapo.kernels.masked_softmax(scores, mask or no_mask(scores), 1 / math.sqrt(head_dim))
      local out = self.dropout(probs):matmul(v)
      return out:transpose(1, 2):contiguous():view({ b, s, -1 })
    end,
  })
end

--- BertSelfOutput / BertOutput (dense -> dropout -> + residual -> LayerNorm) with dropout, the
--- residual add and LayerNorm in one kernel (slapo.kernels.bias_dropout_add_layer_norm). The
--- dense layer still runs as itself, so a row-parallel dense keeps its all-reduce (and adds its
--- bias after it); the dropout mask is drawn as the Dropout module draws it.
function M.FusedBertOutput(out)
  if out:type() ~= "BertSelfOutput" and out:type() ~= "BertOutput" then
    error(("op.FusedBertOutput: expected a BertSelfOutput or BertOutput to replace, got %s"):format(out:type()), 2)
  end
  local p = tonumber(out.dropout:describe():match("p=([%d%.e%-]+)"))
  local eps = tonumber(out.LayerNorm:describe():match("eps=([%d%.e%-+]+)"))
  local no_bias = zeros_cache({ out.LayerNorm.weight:size(0) })
  return slapo.nn.Module({
    type = "Fused" .. out:type(),
    children = { dense = out.dense, LayerNorm = out.LayerNorm, dropout = out.dropout },
    forward = function(self, x, residual)
      local h = self.dense(x)
      return slapo.kernels.bias_dropout_add_layer_norm(h, no_bias(h), residual, self.LayerNorm.weight,
        self.LayerNorm.bias, { p = p, training = self.dropout:is_training(), eps = eps })
    end,
  })
end

--- Megatron's parallel Linear as one module (Slapo's LinearWithSync): a Linear whose weight is
--- already sharded, with the collective its mode needs built in. "column" (weight split by output
--- features): the input enters through f (identity forward, gradient all-reduced backward).
--- "row" (weight split by input features): the partial products leave through g (all-reduce
--- forward), and the bias is added once, after the reduction. opts: {mode =, group =}.
function M.LinearWithSync(linear, opts)
  expect_type(linear, "Linear", "LinearWithSync")
  opts = opts or {}
  local mode, group = opts.mode, opts.group
  if mode ~= "column" and mode ~= "row" then
    error(("op.LinearWithSync: mode must be \"column\" or \"row\", got %s"):format(tostring(mode)), 2)
  end
  local params = { weight = linear.weight }
  for name in linear:named_parameters() do
    if name == "bias" then
      params.bias = linear.bias
    end
  end
  local ag = slapo.dist.autograd
  return slapo.nn.Module({
    type = "LinearWithSync",
    params = params,
    forward = function(self, x)
      if mode == "column" then
        return slapo.F.linear(ag.copy_to(x, group), self.weight, self.bias)
      end
      local y = ag.reduce_from(slapo.F.linear(x, self.weight), group)
      return self.bias and y + self.bias or y
    end,
  })
end

-- The lowest value of each float dtype: a masked score that softmax turns into exactly 0 (HF's choice).
local lowest = { float32 = -3.4028234663852886e38, float64 = -1.7976931348623157e308,
  bfloat16 = -3.3895313892515355e38, float16 = -65504 }

-- [s, s] additive causal mask (0 on and below the diagonal, the dtype's lowest above) on `like`'s
-- device and dtype, made once per size, device and dtype.
local causal_masks = {}
local function causal_mask(s, like)
  local key = s .. "/" .. like:device() .. "/" .. like:dtype()
  if not causal_masks[key] then
    local rows, low = {}, lowest[like:dtype()] or -1e30
    for i = 1, s do
      local row = {}
      for j = 1, s do
        row[j] = j > i and low or 0
      end
      rows[i] = row
    end
    causal_masks[key] = slapo.tensor(rows):to(like:dtype()):to(like:device())
  end
  return causal_masks[key]
end

--- GPT2Attention with the attention core in the memory-efficient kernel (no S x S matrix).
--- The head size is the original's; the head count follows c_attn's width, so it also works
--- on a tensor-parallel shard. Attention dropout is not applied (use it for eval or p = 0).
--- {backend = "kernel"} (default: slapo.kernels.attention, which is scaled_dot_product_attention
--- on CUDA with LibTorch 2.x) or "math" (matmul, softmax, matmul: the S x S scores in memory), or,
--- in a CUDA build of LibTorch 2.x, one of SDPA's kernels by name as Slapo's test_attention picks
--- them: "flash" (FlashAttention) or "efficient" (memory-efficient). A padding mask always takes
--- the math path: the kernels take no mask.
function M.FusedGPT2Attention(attn, opts)
  expect_type(attn, "GPT2Attention", "FusedGPT2Attention")
  opts = opts or {}
  for key in pairs(opts) do
    if key ~= "backend" then
      error(("op.FusedGPT2Attention: unknown option '%s' (valid: backend)"):format(tostring(key)), 2)
    end
  end
  local backend = opts.backend or "kernel"
  local choices = { "kernel", "math" }
  for _, name in ipairs(slapo.kernels.sdpa_backends()) do
    table.insert(choices, name)
  end
  local known = false
  for _, name in ipairs(choices) do
    known = known or name == backend
  end
  if not known then
    local why = (backend == "flash" or backend == "efficient")
      and " in this build: SDPA's flash and efficient kernels need a CUDA build of LibTorch 2.x" or ""
    error(("op.FusedGPT2Attention: unknown backend '%s'%s (choices: %s)"):format(tostring(backend), why,
      table.concat(choices, ", ")), 2)
  end
  local head_dim = tonumber(attn:describe():match("head_dim=(%d+)"))
  if attn:describe():match("scale=") then  -- the kernel scales by 1 / sqrt(head_dim)
    error(("op.FusedGPT2Attention: the attention scales its scores by %s (scale_attn_weights or "
      .. "scale_attn_by_inverse_layer_idx), the kernel by 1 / sqrt(head_dim)"):format(attn:describe():match("scale=(%S+)")), 2)
  end
  return slapo.nn.Module({
    type = "FusedGPT2Attention",
    children = { c_attn = attn.c_attn, c_proj = attn.c_proj, resid_dropout = attn.resid_dropout },
    -- mask: the model's additive causal + padding mask, given only with padding; the kernel takes
    -- no mask, so a padded batch runs softmax(q k^T / sqrt(D) + mask) v instead
    forward = function(self, x, mask)
      local b, s = x:size(0), x:size(1)
      local qkv = self.c_attn(x)
      local width = qkv:size(2) / 3
      local function heads(i)
        return qkv:narrow(2, i * width, width):reshape({ b, s, width / head_dim, head_dim }):transpose(1, 2)
      end
      local out
      if mask or backend == "math" then
        local q, k = heads(0), heads(1)
        local scores = q:matmul(k:transpose(-1, -2)) * (1 / math.sqrt(head_dim))
        out = slapo.F.softmax(scores + (mask or causal_mask(s, scores)), -1):matmul(heads(2))
      else
        out = slapo.kernels.attention(heads(0), heads(1), heads(2),
          { causal = true, backend = backend == "kernel" and "auto" or backend })
      end
      return self.resid_dropout(self.c_proj(out:transpose(1, 2):reshape({ b, s, width })))
    end,
  })
end

return M
