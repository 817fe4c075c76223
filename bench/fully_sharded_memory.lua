-- Model state per rank under plain data parallelism, ZeRO-1 and fully sharded data parallelism,
-- after one AdamW step, two ways:
-- - counted: the bytes of this rank's parameters, their gradients and the optimizer's state
--   tensors (opt:state_tensors), the model-state part that should scale as 1/N;
-- - held: slapo.held_tensor_mib around building the model, its layout and optimizer and the step
--   (everything still allocated: buffers, gathered copies, allocator effects).
-- Run on 1, 2 and 4 ranks by bench/fully_sharded_memory; one run prints one line per mode from
-- rank 0: "mode ranks counted_MiB held_MiB" (each the fullest rank's).
--   slapo-lua run --nproc N bench/fully_sharded_memory.lua [dp|zero1|fsdp ...]
local world = slapo.dist.world_size()
-- GPT-2's shape at a width whose every first axis divides 1, 2 and 4 ranks (9.3 M parameters)
local config = { n_embd = 256, n_layer = 8, n_head = 4, vocab_size = 4096, n_positions = 128, resid_pdrop = 0,
  embd_pdrop = 0, attn_pdrop = 0 }

-- parameters (each tensor once), gradients and optimizer state on this rank, in MiB
local function counted_mib(model, optimizer)
  local bytes = 0
  for _, p in ipairs(model:parameters()) do  -- a tied weight once
    bytes = bytes + p:numel() * 4 + (p.grad and p.grad:numel() * 4 or 0)
  end
  for _, t in pairs(optimizer:state_tensors(model)) do
    bytes = bytes + t:numel() * 4
  end
  return bytes / 2 ^ 20
end

local function step(model, optimizer, finish)
  slapo.manual_seed(10 + slapo.dist.rank())  -- each replica its own rows
  local ids = slapo.randint(0, config.vocab_size, { 2, 64 })
  optimizer:zero_grad()
  model(ids, { labels = ids }):backward()
  if finish then
    finish()
  end
  optimizer:step()
end

local modes = {
  dp = function(model)
    local dp = slapo.dist.data_parallel(model)
    local optimizer = slapo.optim.adamw(model, { lr = 1e-3 })
    step(model, optimizer, function() dp:finish() end)
    return dp, optimizer
  end,
  zero1 = function(model)
    local optimizer = slapo.optim.zero_adamw(model, { lr = 1e-3 })
    step(model, optimizer)
    return optimizer
  end,
  fsdp = function(model)
    local sch = slapo.create_schedule(model)
    for _, layer in ipairs(sch["transformer.h"]:children()) do
      layer:fully_shard()
    end
    sch:fully_shard()
    local optimizer = slapo.optim.adamw(model, { lr = 1e-3 })
    step(model, optimizer)
    return sch, optimizer
  end,
}

local chosen = #arg > 0 and arg or { "dp", "zero1", "fsdp" }
for _, mode in ipairs(chosen) do
  local make = modes[mode] or error(("fully_sharded_memory: unknown mode '%s' (modes: dp, zero1, fsdp)"):format(mode))
  collectgarbage()
  collectgarbage()
  local held, model, made = slapo.held_tensor_mib(function()
    slapo.manual_seed(0)
    local model = slapo.models.gpt2(config)
    return model, { make(model) }
  end)
  local counted = counted_mib(model, made[#made])  -- after the meter: state_tensors may copy
  local all, fullest = slapo.dist.all_gather(slapo.tensor({ counted, held }), 0):tolist(), { 0, 0 }
  for i, v in ipairs(all) do  -- counted, held of rank 0, then rank 1, ...
    fullest[2 - i % 2] = math.max(fullest[2 - i % 2], v)
  end
  if slapo.dist.rank() == 0 then
    print(("%s %d %.2f %.2f"):format(mode, world, fullest[1], fullest[2]))
  end
  model, made = nil, nil
  collectgarbage()
  collectgarbage()
end
