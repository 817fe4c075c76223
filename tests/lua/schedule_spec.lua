-- The schedule tree: path indexing, errors naming the closest children, iteration, printing, log.
local function tiny_bert()
  return slapo.models.bert({
    hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64,
    vocab_size = 100, max_position_embeddings = 16,
  })
end

describe("schedule", function()
  it("indexes modules by their PyTorch paths", function()
    local sch = slapo.create_schedule(tiny_bert())
    local q = sch["bert.encoder.layer.0.attention.self.query"]
    eq("bert.encoder.layer.0.attention.self.query", q.path)
    eq("query", q.name)
    eq("Linear", q.mod:type())
    eq("bert.encoder.layer.0.attention.self", q.parent.path)
    eq("", sch.path)
    eq(nil, sch.parent)
    eq(1, sch.world_size)
    eq(0, sch.rank)
    -- relative lookup from a sub-schedule reaches the same node
    eq(q, sch["bert.encoder"]["layer.0.attention.self.query"])
  end)

  it("names the closest existing children for an unknown path", function()
    local sch = slapo.create_schedule(tiny_bert())
    eq("schedule: no module 'atention' under 'bert.encoder.layer.0' (did you mean 'attention'?); "
      .. "its children are: attention, intermediate, output",
      pcall_err(function() return sch["bert.encoder.layer.0.atention"] end))
    matches("no module '7' under 'bert.encoder.layer'", pcall_err(function() return sch["bert.encoder.layer.7"] end))
    matches("has no children", pcall_err(function() return sch["bert.encoder.layer.0.output.dense.weight"] end))
  end)

  it("holds the model's own modules, so a forward through sch.mod equals the model", function()
    local model = tiny_bert()
    local sch = slapo.create_schedule(model)
    eq(model, sch.mod)
    eq(model.bert, sch["bert"].mod)
  end)

  it("iterates every descendant with paths relative to the node", function()
    local sch = slapo.create_schedule(tiny_bert())
    local paths = {}
    for path, sub in sch["bert.encoder.layer.1.attention"]:named_schedules() do
      table.insert(paths, path)
      eq("bert.encoder.layer.1.attention." .. path, sub.path)
    end
    eq({ "self", "self.query", "self.key", "self.value", "self.dropout", "output", "output.dense",
      "output.LayerNorm", "output.dropout" }, paths)
  end)

  it("prints a tree with types, shapes, counts and repeated layers collapsed", function()
    local sch = slapo.create_schedule(tiny_bert())
    local text = tostring(sch)
    matches("^BertLMHeadModel  ", text)
    matches("%(bert%.encoder%.layer%.0%-1%) 2 x BertLayer", text)
    matches("%(bert%.encoder%.layer%.0%.attention%.self%.query%) Linear%(in_features=32, out_features=32, bias=true%)  weight %[32, 32%]  bias %[32%]", text)
    matches("weight %[100, 32%] tied to bert%.embeddings%.word_embeddings%.weight", text)
    local sub = tostring(sch["bert.encoder.layer.0.attention"])
    matches("^BertAttention", sub)
  end)

  it("starts with an empty log that is replayable Lua", function()
    local sch = slapo.create_schedule(tiny_bert())
    local source = sch:log()
    matches("^%-%- slapo schedule log: 0 primitives", source)
    local replay = assert(load(source))()
    eq("function", type(replay))
    replay(sch)
  end)
end)
