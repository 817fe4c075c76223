-- Training checkpoints in pieces (io/sharded_checkpoint.cpp): what a damaged or foreign index
-- gets, by name. The resharding itself runs on several ranks: tests/cli/test_reshard_checkpoint.sh.
local checkpoint = require("slapo.checkpoint")

local function tiny()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 16 })
end

-- A checkpoint of one step of AdamW, its directory and the model and optimizer that wrote it.
local function saved()
  local dir = os.tmpname()
  os.remove(dir)
  local model = tiny()
  local opt = slapo.optim.adamw(model, { lr = 1e-2 })
  local ids = slapo.randint(0, 64, { 2, 8 })
  model(ids, { labels = ids }):backward()
  opt:step()
  return checkpoint.save(dir, 1, model, opt), model, opt, dir
end

-- Rewrites the index's text: `pattern` (a Lua pattern, once) becomes `replacement`; trainer.json
-- records the new index's checksum, as if it had been saved so (the checks past the checksum's).
local function edit_index(path, pattern, replacement)
  local util = require("slapo.util")
  local text = assert(util.read_file(path .. "/index.json"))
  local edited, count = text:gsub(pattern, replacement, 1)
  assert(count == 1, "the index has no " .. pattern)
  util.write_file(path .. "/index.json", edited)
  local trainer = slapo.json_decode(assert(util.read_file(path .. "/trainer.json")))
  trainer.files["index.json"] = slapo._crc32_file(path .. "/index.json")
  util.write_file(path .. "/trainer.json", slapo.json_encode(trainer))
end

describe("training checkpoints in pieces", function()
  it("list every tensor's pieces with its place in the whole tensor, and load back equal", function()
    local path, model, opt, dir = saved()
    local index = slapo.json_decode(io.open(path .. "/index.json"):read("*a"))
    local wte = index.sections.model["transformer.wte.weight"]
    eq({ 64, 32 }, wte.shape)
    eq({ { file = "model-rank0.safetensors", entry = "transformer.wte.weight", offsets = { 0, 0 }, sizes = { 64, 32 } } },
      wte.pieces)
    eq({ 64, 32 }, index.sections.optimizer["transformer.wte.weight.exp_avg"].shape)
    local fresh = tiny()
    local fresh_opt = slapo.optim.adamw(fresh, { lr = 1e-2 })
    eq(1, checkpoint.load(path, fresh, fresh_opt))
    local theirs = fresh:state_dict()
    for name, p in pairs(model:state_dict()) do
      assert(p:equal(theirs[name]), name)
    end
    local state, loaded = opt:state_tensors(model), fresh_opt:state_tensors(fresh)
    for name, t in pairs(state) do
      assert(t:equal(loaded[name]), name)
    end
    os.execute("rm -rf " .. dir)
  end)

  it("refuse an index whose pieces are not where it says, or that lacks a tensor, naming it", function()
    local path, _, _, dir = saved()
    local fresh = tiny()
    local before = fresh:state_dict()["transformer.h.0.mlp.c_fc.weight"]:clone()
    local function load()
      return pcall_err(checkpoint.load, path, fresh, slapo.optim.adamw(fresh, { lr = 1e-2 }))
    end
    edit_index(path, '"entry": "transformer%.h%.0%.mlp%.c_fc%.weight"', '"entry": "missing"')
    matches("resume: '[^']+' lists 'missing' of 'transformer%.h%.0%.mlp%.c_fc%.weight' in 'model%-rank0%.safetensors', "
      .. "which does not hold it", load())
    edit_index(path, '"entry": "missing"', '"entry": "transformer.h.0.mlp.c_fc.weight"')
    edit_index(path, '("entry": "transformer%.wpe%.weight",%s*"file": "[^"]+",%s*"offsets": %[%s*0,%s*0%s*%],%s*'
      .. '"sizes": %[%s*)16', "%18")
    matches("resume: 'transformer%.wpe%.weight' in '[^']+' is %[16, 32%], its index says %[8, 32%]", load())
    edit_index(path, '("offsets": %[%s*)0(,%s*0%s*%],%s*"sizes": %[%s*8)', "%112%2")
    matches("resume: '[^']+' is not a sharded checkpoint index: a piece of 'transformer%.wpe%.weight' at %[12, 0%] of "
      .. "size %[8, 32%] is not inside its shape %[16, 32%]", load())
    edit_index(path, '("offsets": %[%s*)12(,%s*0%s*%],%s*"sizes": %[%s*)8', "%10%216")
    edit_index(path, '"transformer%.h%.0%.mlp%.c_proj%.weight": {', '"elsewhere": {')
    matches("resume: the checkpoint '[^']+' has no 'transformer%.h%.0%.mlp%.c_proj%.weight', which the model holds",
      load())
    assert(before:equal(fresh:state_dict()["transformer.h.0.mlp.c_fc.weight"]), "the model is as it was")
    os.execute("rm -rf " .. dir)
  end)

  it("refuse a whole shape that is not the model's", function()
    local path, _, _, dir = saved()
    local wider = slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 2, vocab_size = 96, n_positions = 16 })
    matches("resume: 'lm_head%.weight' is %[64, 32%] in the checkpoint '[^']+' but %[96, 32%] in this model",
      pcall_err(checkpoint.load, path, wider, slapo.optim.adamw(wider, { lr = 1e-2 })))
    os.execute("rm -rf " .. dir)
  end)
end)
