-- Checkpoint I/O: safetensors round trips (single and sharded), malformed files, TorchScript.
local function tmpdir()
  local path = os.tmpname()
  os.remove(path)
  assert(os.execute("mkdir -p " .. path) == 0)
  return path
end

local function write_bytes(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

-- little-endian u64 header length + header JSON + data
local function safetensors_bytes(header, data)
  local n = #header
  local len = ""
  for _ = 1, 8 do
    len = len .. string.char(n % 256)
    n = math.floor(n / 256)
  end
  return len .. header .. (data or "")
end

local small = {
  gpt2 = function() return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16 }) end,
  bert = function() return slapo.models.bert({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
    intermediate_size = 64, vocab_size = 64 }) end,
  llama = function() return slapo.models.llama({ hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
    num_key_value_heads = 2, intermediate_size = 64, vocab_size = 64 }) end,
}

describe("save and from_pretrained", function()
  for kind, make in pairs(small) do
    it("round-trip " .. kind .. " bit-exactly", function()
      slapo.manual_seed(11)
      local model = make():eval()
      local dir = tmpdir()
      slapo.save(model, dir)
      local loaded = slapo.models.from_pretrained(dir):eval()
      eq(model:num_params(), loaded:num_params())
      local theirs = loaded:state_dict()
      for name, t in pairs(model:state_dict()) do
        assert(t:equal(theirs[name]), name .. " differs")
      end
      local ids = slapo.randint(0, 64, { 2, 5 })
      assert(model(ids):equal(loaded(ids)), "logits differ")
      os.execute("rm -rf " .. dir)
    end)
  end

  it("keeps tied weights tied after loading and stores them once", function()
    local dir = tmpdir()
    slapo.save(small.gpt2(), dir)
    local loaded = slapo.models.from_pretrained(dir)
    local tied = false
    for name in loaded:named_parameters() do
      tied = tied or name == "lm_head.weight"
    end
    eq(false, tied, "lm_head.weight is the same tensor as transformer.wte.weight")
    local before = loaded.lm_head.weight:clone()
    loaded:load_state_dict({ ["transformer.wte.weight"] = slapo.zeros(before:size()) })
    eq(0, loaded.lm_head.weight:abs():sum():item(), "writing wte writes lm_head")
    os.execute("rm -rf " .. dir)
  end)

  it("reads sharded checkpoints with an index", function()
    slapo.manual_seed(5)
    local model = small.llama()
    local dir = tmpdir()
    slapo.save(model, dir, { max_shard_size = 20000 })
    local f = assert(io.open(dir .. "/model.safetensors.index.json"), "index written")
    local index = f:read("*a")
    f:close()
    local shards = {}
    for file in index:gmatch('"(model%-%d+%-of%-%d+%.safetensors)"') do
      shards[file] = true
    end
    local count = 0
    for _ in pairs(shards) do
      count = count + 1
    end
    assert(count >= 2, "several shards, got " .. count)
    eq(nil, io.open(dir .. "/model.safetensors"), "no single-file checkpoint beside the shards")
    local loaded = slapo.models.from_pretrained(dir)
    for name, t in pairs(model:state_dict()) do
      assert(t:equal(loaded:state_dict()[name]), name)
    end
    -- an index that leaves a parameter out is refused by name, read whole or sliced (meta, then build)
    local name = index:match('"(model%.layers%.1%.mlp%.[%w_]+%.weight)"')
    assert(name, "the index lists layer 1's MLP")
    f = assert(io.open(dir .. "/model.safetensors.index.json", "w"))
    f:write((index:gsub('\n *"' .. name:gsub("%.", "%%.") .. '": "[^"]*",?', "")))
    f:close()
    local missing = ("from_pretrained: '%s' has no weights for %s"):format(dir, name):gsub("[%.%-]", "%%%0")
    matches(missing, pcall_err(function() slapo.models.from_pretrained(dir) end))
    matches(missing, pcall_err(function()
      slapo.build(slapo.create_schedule(slapo.models.from_pretrained(dir, { device = "meta" })))
    end))
    os.execute("rm -rf " .. dir)
  end)
end)

describe("malformed safetensors", function()
  local function load_with(bytes)
    local dir = tmpdir()
    slapo.save(small.gpt2(), dir)
    write_bytes(dir .. "/model.safetensors", bytes)
    local err = pcall_err(function() slapo.models.from_pretrained(dir) end)
    os.execute("rm -rf " .. dir)
    return err
  end

  it("reject a file shorter than its header length", function()
    matches("shorter than the 8%-byte header length", load_with("abc"))
  end)
  it("reject a header that runs past the end", function()
    matches("header length 1000 runs past the end", load_with(string.char(232, 3, 0, 0, 0, 0, 0, 0) .. "{}"))
  end)
  it("reject invalid JSON", function()
    matches("header is not valid JSON", load_with(safetensors_bytes("{not json")))
  end)
  it("reject offsets outside the data", function()
    matches("data_offsets %[0, 400%] lie outside the 16%-byte data section",
      load_with(safetensors_bytes('{"w":{"dtype":"F32","shape":[10,10],"data_offsets":[0,400]}}', string.rep("x", 16))))
  end)
  it("reject a size that does not match the shape", function()
    matches("8 bytes of data for shape %[3%] of F32 %(12 bytes expected%)",
      load_with(safetensors_bytes('{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', string.rep("x", 8))))
  end)
  it("reject unknown dtypes", function()
    matches("unsupported dtype 'F8'",
      load_with(safetensors_bytes('{"w":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}', "x")))
  end)
  it("name the missing weights of a model", function()
    matches("has no weights for",
      load_with(safetensors_bytes('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "xxxx")))
  end)
end)

describe("TorchScript", function()
  it("loads a scripted module as a tree whose forward matches PyTorch's", function()
    local dir = tmpdir()
    -- SLAPO_TORCH_PYTHON: a python with torch (device-check sets the GPU image's; Debian's otherwise)
    local python = os.getenv("SLAPO_TORCH_PYTHON") or "/usr/bin/python3"
    local rc = os.execute(python .. " tests/fixtures/make_torchscript.py " .. dir)
    eq(0, rc, "fixture export with " .. python)
    local block = slapo.load(dir .. "/block.pt"):eval()
    local expected = slapo.load(dir .. "/expected.pt"):state_dict()
    eq("Block", block:type())
    eq("Linear", block.fc1:type())
    eq({ 12, 6 }, block.fc1.weight:size())
    eq(6 * 12 + 12 + 12 * 6 + 6 + 12, block:num_params())
    close(expected.output, block(expected.input))
    local names = {}
    for name in block:named_modules() do
      table.insert(names, name)
    end
    eq({ "", "fc1", "act", "fc2", "norm" }, names)
    -- gradients flow into the script's own parameters
    block:train()
    block(expected.input):sum():backward()
    assert(block.fc1.weight.grad ~= nil)
    os.execute("rm -rf " .. dir)
  end)

  it("reports a file that is not TorchScript", function()
    local path = os.tmpname()
    write_bytes(path, "not a zip")
    matches("load: '.*' is not a TorchScript module", pcall_err(function() slapo.load(path) end))
    os.remove(path)
  end)
end)
