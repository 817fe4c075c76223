-- What training reports as memory on the test device (SLAPO_TEST_DEVICE, default cpu;
-- scripts/device-check sets cuda): on a GPU, CUDA's caching allocator's peaks (tensors allocated, and
-- what it reserved from the driver) in slapo.train's metrics.jsonl (and its memory column), the process's resident
-- memory beside them; on a CPU the resident memory.
local device = test_device()

local function tiny_gpt2()
  slapo.manual_seed(3)
  return slapo.models.gpt2({ n_embd = 64, n_layer = 2, n_head = 4, vocab_size = 512, n_positions = 64,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 }):to(device)
end

-- slapo.train's 2 steps on the device with metrics.jsonl; the result and the file's lines
local function train_with_metrics()
  local path = os.tmpname()
  local result = slapo.train({ model = tiny_gpt2(), steps = 2, data = { vocab = 512, batch = 4, seq = 64 },
    metrics = path, quiet = true })
  local lines = {}
  for line in io.lines(path) do lines[#lines + 1] = slapo.json_decode(line) end
  os.remove(path)
  return result, lines
end

describe("memory on " .. device, function()
  it("counts CUDA's allocations and reserved memory, and resets the peak to what is held", function()
    if device == "cpu" then skip("needs SLAPO_TEST_DEVICE=cuda: CUDA's allocator counts only on a GPU") end
    local before = slapo.cuda.memory_stats()
    local t = slapo.zeros({ 16, 1024, 1024 }):to(device)  -- 64 MiB of float32
    local held = slapo.cuda.memory_stats()
    assert(held.allocated_mib - before.allocated_mib >= 64, ("64 MiB on the GPU counted as %.1f"):format(
      held.allocated_mib - before.allocated_mib))
    assert(held.reserved_mib >= held.allocated_mib and held.peak_allocated_mib >= held.allocated_mib)
    t = nil
    collectgarbage()
    slapo.cuda.reset_peak_memory_stats()
    local after = slapo.cuda.memory_stats()
    assert(after.allocated_mib < held.allocated_mib - 63, "the freed tensor is still counted")
    eq(after.allocated_mib, after.peak_allocated_mib, "the peak starts again from what is held")
  end)

  it("reports each step's memory in slapo.train's metrics.jsonl", function()
    local result, lines = train_with_metrics()
    eq(2, #lines)
    for _, line in ipairs(lines) do
      assert(line.memory_mib > 0, "memory_mib " .. tostring(line.memory_mib))
      if device == "cpu" then
        eq(nil, line.cuda_peak_allocated_mib, "no CUDA field on a CPU")
      else
        -- the step's tensors on the GPU, the allocator's reserve at least as large, the process beside them
        eq(line.cuda_peak_allocated_mib, line.memory_mib)
        assert(line.cuda_peak_reserved_mib >= line.cuda_peak_allocated_mib)
        assert(line.resident_mib > 0)
      end
    end
    eq(2, #result.losses)
  end)
end)
