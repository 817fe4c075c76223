--- Megatron-style tensor parallelism for T5ForConditionalGeneration, as a schedule. Every
--- attention (the encoder's and the decoder's self-attention, the decoder's cross-attention) keeps
--- its heads of q, k and v and its rows of o on each rank; the relative position bias tables are
--- split by heads with them, so each rank adds the bias of its own heads and no bias crosses ranks.
--- The feed-forward layers (ReLU or gated) are column- then row-parallel, and the shared vocabulary
--- (both stacks' embeddings and the head, tied or not) is split over the ranks.
---
--- The cross-attention reads the encoder's output in its k and v: their input gradients are
--- partial sums on each rank, so k and v all-reduce them themselves (the attention module's own
--- sync reaches only its first input, the decoder's states).
---
--- Example usage:
---   require("slapo.schedules.t5").schedule(sch, { checkpoint = 0.5 })
local common = require("slapo.schedules.common")
local M = {}

--- Where the model keeps its layer lists: the encoder's blocks, then the decoder's.
M.stacks = { "encoder.block", "decoder.block" }

local function attention(attn, cross, opts)
  common.column(attn["q"], { sync_input = false })
  for _, name in ipairs({ "k", "v" }) do
    common.column(attn[name], { sync_input = cross })
  end
  attn:sync("bwd_post", "all_reduce")
  common.row(attn["o"])
  if common.has_child(attn, "relative_attention_bias") then
    -- [buckets, heads]: the columns of this rank's heads
    attn["relative_attention_bias"]:shard("weight", 1)
  end
  if opts.fork_rng ~= false then
    attn["dropout"]:fork_rng()
  end
end

--- One block's Megatron layout (an encoder's or a decoder's).
function M.block(block, opts)
  local sublayers = block["layer"]:children()
  attention(sublayers[1]["SelfAttention"], false, opts)
  if #sublayers == 3 then
    attention(sublayers[2]["EncDecAttention"], true, opts)
  end
  local ff = sublayers[#sublayers]["DenseReluDense"]
  for _, name in ipairs({ "wi", "wi_0", "wi_1" }) do
    if common.has_child(ff, name) then
      common.column(ff[name], { sync_input = false })
    end
  end
  ff:sync("bwd_post", "all_reduce")
  common.row(ff["wo"])
end

-- The shared vocabulary split over the ranks: one tensor under `shared`, both stacks'
-- embed_tokens and (tied) lm_head, so every module that reads it records the same split.
local function vocab_parallel(sch)
  local vocab = sch["shared"].mod.weight:size(0)
  if vocab % sch.world_size ~= 0 then
    return false, ("vocabulary %d does not divide by %d ranks; embeddings stay replicated"):format(vocab,
      sch.world_size)
  end
  sch["shared"]:shard("weight", 0)
  for _, stack in ipairs({ "encoder", "decoder" }) do
    sch[stack .. ".embed_tokens"]:shard("weight", 0):sync("fwd_post", "all_reduce")
  end
  local head = sch["lm_head"]
  head:shard("weight", 0)
  head:sync("bwd_post", "all_reduce")
  head:sync("fwd_post", "all_gather", { axis = -1 })
  return true
end

--- opts: tp (default true when the group has several ranks), checkpoint (fraction of each stack's
--- blocks, default 0), fork_rng (default true), layer (a function(block_schedule) laying out every
--- block of both stacks instead). T5 has no fused kernels: fuse adds a note. Returns notes.
function M.schedule(sch, opts)
  opts = opts or {}
  local notes = {}
  if opts.layer ~= nil and type(opts.layer) ~= "function" then
    error(("schedule: layer must be a function(block_schedule), got %s"):format(type(opts.layer)), 2)
  end
  local tp = sch.world_size > 1 and opts.tp ~= false
  if tp and not opts.layer then
    common.check_heads(sch, sch.world_size, 3)
  end
  for _, stack in ipairs(M.stacks) do
    local blocks = sch[stack]:children()
    if tp then
      for _, block in ipairs(blocks) do
        (opts.layer or function(b) M.block(b, opts) end)(block)
      end
    end
    common.checkpoint_layers(blocks, opts.checkpoint)
  end
  if tp then
    local ok, why = vocab_parallel(sch)
    if not ok then
      table.insert(notes, why)
    end
  end
  if opts.fuse then
    table.insert(notes, "fuse: slapo.op has no fused kernels for T5ForConditionalGeneration; its layers run unfused")
  end
  return notes
end

return M
