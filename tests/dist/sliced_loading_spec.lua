-- from_pretrained on the meta device, scheduled, then built: every rank reads only the slices it
-- keeps, straight from the checkpoint's mapped file, and ends with the model that loading
-- everything and then scheduling gives.
local rank = slapo.dist.rank()

local function gpt2(vocab)
  slapo.manual_seed(21)
  return slapo.models.gpt2({ n_embd = 128, n_layer = 2, n_head = 4, vocab_size = vocab or 512, n_positions = 64,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
end

-- A checkpoint rank 0 writes and every rank then reads; removed by `done`.
local function checkpoint(vocab)
  local dir = "/tmp/slapo-sliced-" .. os.getenv("MASTER_PORT")
  local model = gpt2(vocab):eval()
  if rank == 0 then slapo.save(model, dir) end
  slapo.dist.barrier()
  local function done()
    slapo.dist.barrier()
    if rank == 0 then os.execute("rm -rf " .. dir) end
  end
  return dir, model, done
end

local function mib_of(model)
  local bytes = 0
  for _, p in ipairs(model:parameters()) do bytes = bytes + p:numel() * 4 end
  return bytes / 2 ^ 20
end

-- Builds the lazily loaded model under `schedule`, and the eagerly loaded one alike; checks they
-- hold the same slices and returns the build's peak tensor memory and this rank's share.
local function build_both(dir, schedule)
  local lazy = slapo.create_schedule(slapo.models.from_pretrained(dir, { device = "meta" }))
  schedule(lazy)
  collectgarbage()  -- earlier tensors freed inside the window would hide what build allocates
  local peak = slapo.peak_tensor_mib(function() slapo.build(lazy) end)
  local eager = slapo.create_schedule(slapo.models.from_pretrained(dir))
  schedule(eager)
  local theirs = eager.mod:state_dict()
  for name, p in pairs(lazy.mod:state_dict()) do
    eq(true, p:equal(theirs[name]), name)
  end
  return lazy.mod:eval(), peak, mib_of(lazy.mod)
end

describe("sliced loading", function()
  it("reads each rank's tensor-parallel slices and nothing more", function()
    local dir, full, done = checkpoint()
    local model, peak, share = build_both(dir, function(sch) require("slapo.schedules.gpt2").schedule(sch) end)
    assert(share < 0.8 * mib_of(full), "tensor parallelism splits most of the model")
    assert(peak < 1.2 * share + 0.26, ("build's peak %.2f MiB, this rank keeps %.2f MiB"):format(peak, share))
    local ids = slapo.randint(0, 512, { 2, 16 })
    close(full(ids), model(ids), { rtol = 1e-5, atol = 1e-5 })
    done()
  end)

  it("reads each rank's fully sharded slices: 1/N of the model", function()
    local dir, full, done = checkpoint()
    local model, peak, share = build_both(dir, function(sch)
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard() end
      sch:fully_shard()
    end)
    local world = slapo.dist.world_size()
    assert(math.abs(share - mib_of(full) / world) < 1e-9, "1/N of every parameter")
    assert(peak < 1.2 * share, ("build's peak %.2f MiB, this rank keeps %.2f MiB"):format(peak, share))
    local ids = slapo.randint(0, 512, { 2, 16 })
    close(full(ids), model(ids), { rtol = 1e-5, atol = 1e-5 })
    done()
  end)

  it("lets a pipeline stage read only its own layers, the same values as loading everything", function()
    local dir, full, done = checkpoint()
    local function cut(model)
      local sch = slapo.create_schedule(model)
      sch["transformer.h.0"]:cut_pipeline_stage()  -- stage 0: the embeddings and block 0; stage 1: block 1, the head
      return sch
    end
    local options = { pipeline = { group = slapo.dist.world(), micro_batches = 2 } }
    local lazy = cut(slapo.models.from_pretrained(dir, { device = "meta" }))
    collectgarbage()
    local ids = slapo.randint(0, 512, { 4, 16 })
    local pipe
    local peak = slapo.peak_tensor_mib(function()
      pipe = slapo.build(lazy, options)  -- every parameter a stand-in that holds no memory
      pipe:prepare(ids)  -- the trace names this rank's stage, and what it runs is read
    end)
    local block = mib_of(full.transformer.h["0"])
    assert(peak < mib_of(full) - 0.9 * block, ("the peak %.2f MiB: the whole model is %.2f MiB, a block %.2f MiB")
      :format(peak, mib_of(full), block))
    local eager = slapo.build(cut(slapo.models.from_pretrained(dir)), options)
    eager:prepare(ids)
    local theirs = {}
    for name, p in eager:named_parameters() do theirs[name] = p end
    local count = 0
    for name, p in pipe:named_parameters() do
      eq(true, p:equal(theirs[name]), name)
      count = count + 1
    end
    assert(count > 10, "compared " .. count .. " parameters")
    eq(eager:step(ids, { labels = ids }), pipe:step(ids, { labels = ids }))
    done()
  end)

  it("reads rows the ranks do not divide evenly: a vocabulary of 509 as torch.chunk splits it", function()
    local dir, full, done = checkpoint(509)
    local model = build_both(dir, function(sch)
      for _, block in ipairs(sch["transformer.h"]:children()) do block:fully_shard() end
      sch:fully_shard()
    end)
    local world = slapo.dist.world_size()
    local stride = math.ceil(509 / world)
    eq(math.min(stride, 509 - rank * stride), model.transformer.wte.weight:size(0))
    local ids = slapo.randint(0, 509, { 2, 16 })
    close(full(ids), model(ids), { rtol = 1e-5, atol = 1e-5 })
    done()
  end)
end)
