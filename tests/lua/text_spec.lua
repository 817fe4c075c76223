-- GPT-2's BPE in Lua against known GPT-2 token ids, and packing real text into batches.
-- The files come from scripts/fetch-data (run by scripts/setup).
local bpe = require("slapo.bpe").load(require("slapo.text").data_dir() .. "/gpt2-bpe")

describe("bpe", function()
  it("encodes as GPT-2 does", function()
    eq({ 15496, 11, 995, 0 }, bpe:encode("Hello, world!"))
    eq({ 464, 2068, 7586, 21831 }, bpe:encode("The quick brown fox"))
    eq({ 40, 1101, 257, 1332, 13 }, bpe:encode("I'm a test."))
    eq({ 50256 }, { bpe.encoder["<|endoftext|>"] })
  end)

  it("round-trips any text, spaces, newlines and UTF-8 included", function()
    for _, s in ipairs({ "  two  spaces\n\n\tand tabs ", "caf\195\169 na\195\175ve \226\128\148 dash", "x = 1234567;" }) do
      eq(s, bpe:decode(bpe:encode(s)))
    end
  end)
end)

describe("text dataset", function()
  it("packs the corpus into consecutive [batch, seq] windows", function()
    local data = require("slapo.text").dataset({ last = 2, seq = 16, batch = 2 })
    assert(data.tokens > 1000, "tokens: " .. data.tokens)
    eq(2, data.files)
    local a, b = data.batches(1, 1), data.batches(2, 1)
    eq({ 2, 16 }, a:size())
    assert(not a:equal(b))
    assert(a:equal(data.batches(1, 1)), "deterministic by step")
    matches("%a", bpe:decode(a:narrow(0, 0, 1):view({ 16 }):tolist()))
  end)
end)
