--- Pieces shared by the reference schedules: Megatron's column/row-parallel linear layers,
--- vocab-parallel embeddings and heads, and activation checkpointing of a fraction of layers.
local M = {}

--- Column-parallel: the output features are split (weight rows of a Linear, columns of GPT-2's
--- Conv1D); the input gradient is all-reduced. `groups` splits fused projections (QKV) per section.
function M.column(sch, opts)
  opts = opts or {}
  local conv1d = sch.mod:type() == "Conv1D"
  local groups = opts.groups or 1
  sch:shard("weight", conv1d and 1 or 0, groups > 1 and { groups = groups } or nil)
  if M.has_param(sch, "bias") then
    sch:shard("bias", 0, groups > 1 and { groups = groups } or nil)
  end
  if opts.sync_input ~= false then
    sch:sync("bwd_post", "all_reduce")
  end
end

--- Row-parallel: the input features are split; the partial outputs are all-reduced and the
--- bias is added once, after the reduction.
function M.row(sch)
  sch:shard("weight", sch.mod:type() == "Conv1D" and 0 or 1)
  sch:sync("fwd_post", "all_reduce")
end

--- Megatron's attention: q, k and v column-parallel (each rank computes its heads) with one
--- all-reduce of their shared input's gradient on the attention module; the output projection
--- row-parallel. `qkv`: the three projections' names, `out`: the output projection's.
function M.attention(attn, qkv, out)
  for _, name in ipairs(qkv) do
    M.column(attn[name], { sync_input = false })
  end
  attn:sync("bwd_post", "all_reduce")
  M.row(attn[out])
end

local function contains(names, wanted)
  for name in names do
    if name == wanted then
      return true
    end
  end
  return false
end

function M.has_child(sch, name)
  return contains(sch.mod:named_children(), name)
end

function M.has_param(sch, name)
  return contains(sch.mod:named_parameters(), name)
end

--- Vocab-parallel embedding and (tied or untied) LM head; skipped with a note when the vocabulary
--- does not divide by the group size (HF GPT-2's 50257, for example).
function M.vocab_parallel(embedding, head, head_bias_owner)
  local vocab = embedding.mod.weight:size(0)
  if vocab % embedding.world_size ~= 0 then
    return false, ("vocabulary %d does not divide by %d ranks; embeddings stay replicated"):format(vocab,
      embedding.world_size)
  end
  embedding:shard("weight", 0):sync("fwd_post", "all_reduce")
  local tied = head.mod.weight:size(0) ~= vocab  -- the embedding's shard already shrank the shared tensor
  if not tied then
    head:shard("weight", 0)
  end
  if head_bias_owner then
    head_bias_owner:shard("bias", 0)
  elseif M.has_param(head, "bias") then
    head:shard("bias", 0)
  end
  head:sync("bwd_post", "all_reduce")
  head:sync("fwd_post", "all_gather", { axis = -1 })
  return true
end

--- The outline every reference schedule shares: when the group has several ranks (and opts.tp is
--- not false) run `plan.layer(layer_schedule, opts)` on each layer under `plan.layers`, make the
--- embedding and head vocab-parallel; with opts.fuse run `plan.fuse(layer_schedule, tp, use)` (the
--- slapo.op replacements whose kernels `use(name)` allows); then checkpoint a fraction of the
--- layers. Returns notes.
---   plan = {layers = "model.layers", layer = fn, fuse = fn, embedding = "...", head = "...",
---           head_bias_owner = "..."}
--- Megatron splits attention by heads: each rank must get whole heads (and whole key/value heads).
--- Refused before any shard, with the tensor-parallel sizes that would work; `level` is error()'s,
--- counted from this function (default: the caller of the caller's schedule function).
function M.check_heads(sch, tp, level)
  local config = slapo.models.config(sch.mod)
  local heads = config and (config.n_head or config.num_heads or config.num_attention_heads)
  if not heads then
    return
  end
  local kv = config.num_key_value_heads or heads
  if heads % tp == 0 and kv % tp == 0 then
    return
  end
  local sizes = {}
  for n = 1, heads do
    if heads % n == 0 and kv % n == 0 then
      table.insert(sizes, tostring(n))
    end
  end
  error(("schedule: %d attention heads%s do not split over %d tensor-parallel ranks (the schedule's group); "
    .. "valid sizes: %s"):format(heads, kv ~= heads and (" (%d key/value heads)"):format(kv) or "", tp,
    table.concat(sizes, ", ")), level or 4)
end

function M.megatron(sch, opts, plan)
  opts = opts or {}
  local notes = {}
  local layers = sch[plan.layers]:children()
  if sch.world_size > 1 and opts.tp ~= false and not opts.layer then
    M.check_heads(sch, sch.world_size)
  end
  if sch.world_size > 1 and opts.tp ~= false then
    -- opts.layer(layer_sch): a layout of one's own for every layer (a planner's intra-op pass)
    if opts.layer ~= nil and type(opts.layer) ~= "function" then
      error(("schedule: layer must be a function(layer_schedule), got %s"):format(type(opts.layer)), 3)
    end
    for _, layer in ipairs(layers) do
      if opts.layer then
        opts.layer(layer)
      else
        plan.layer(layer, opts)
      end
    end
    local ok, why = M.vocab_parallel(sch[plan.embedding], sch[plan.head],
      plan.head_bias_owner and sch[plan.head_bias_owner] or nil)
    if not ok then
      table.insert(notes, why)
    end
  end
  if opts.fuse and not plan.fuse then
    table.insert(notes, ("fuse: slapo.op has no fused kernels for %s; its layers run unfused"):format(sch.mod:type()))
  elseif opts.fuse then
    local tp = sch.world_size > 1 and opts.tp ~= false
    local use = M.kernel_chooser(opts.device or require("slapo.kernel_choices").model_device(sch.mod), opts.fuse, notes)
    for _, layer in ipairs(layers) do
      for _, note in ipairs(plan.fuse(layer, tp, use) or {}) do
        table.insert(notes, note)
      end
    end
  end
  M.checkpoint_layers(layers, opts.checkpoint)
  return notes
end

--- fuse = true: use(kernel) is true where bench/kernels.lua measured the kernel faster than the
--- unfused ops on `device` (opts.device, else where the model's parameters are; see
--- slapo.kernel_choices); each kernel left out adds one note. fuse = "all": every kernel.
function M.kernel_chooser(device, fuse, notes)
  if fuse ~= true and fuse ~= "all" then
    error(("schedule: fuse must be true (the kernels that win on this device) or \"all\", got %s"):format(
      tostring(fuse)), 3)
  end
  local choices = require("slapo.kernel_choices")
  local noted = {}
  return function(kernel)
    if fuse == "all" then
      return true
    end
    local ok, why = choices.wins(kernel, device)
    if not ok and not noted[kernel] then
      noted[kernel] = true
      table.insert(notes, why)
    end
    return ok
  end
end

--- Replaces `sub`'s module with `make(module)`; under tensor parallelism the replacement gets the
--- input-gradient all-reduce the replaced module's own ops had (a fused op that reads the
--- column-parallel weight itself bypasses that layer's sync).
function M.replace_fused(sub, make, tp)
  sub:replace(make(sub.mod))
  if tp then
    sub:sync("bwd_post", "all_reduce")
  end
end

--- A LLaMA-style decoder layer's two RMSNorms (input_layernorm, post_attention_layernorm) in
--- slapo.op's fused kernel, where `use("rms_norm")` allows it.
function M.fuse_rms_norms(decoder_layer, use)
  if use("rms_norm") then
    local op = require("slapo.op")
    for _, norm in ipairs({ "input_layernorm", "post_attention_layernorm" }) do
      decoder_layer[norm]:replace(op.FusedRMSNorm(decoder_layer[norm].mod))
    end
  end
end

--- Checkpoints the first ceil(fraction * n) of `layers` (an array of schedules).
function M.checkpoint_layers(layers, fraction)
  local count = math.ceil((fraction or 0) * #layers)
  for i = 1, count do
    layers[i]:checkpoint()
  end
  return count
end

return M
