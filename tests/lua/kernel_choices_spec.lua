-- fuse = true puts in only the kernels bench/kernels.lua measured faster on the model's device.
local choices = require("slapo.kernel_choices")
local ratios = require("slapo.kernel_ratios")

local function scheduled(kind, config, opts)
  slapo.manual_seed(0)
  local sch = slapo.create_schedule(slapo.models[kind](config))
  local notes = require("slapo.schedules." .. kind).schedule(sch, opts)
  return sch, notes
end

local gpt2 = { n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16, attn_pdrop = 0 }
local llama = { hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, intermediate_size = 64, vocab_size = 64 }

describe("kernel choices", function()
  it("follow the recorded ratios: a kernel slower than its ATen ops is left out, with one note", function()
    for _, device in ipairs({ "cpu", "cuda" }) do
      local sch, notes = scheduled("gpt2", gpt2, { fuse = true, device = device })
      local want_mlp = ratios[device].bias_gelu < 1
      eq(want_mlp and "FusedGPT2MLP" or "GPT2MLP", sch["transformer.h.1.mlp"].mod:type(), device)
      eq(ratios[device].attention < 1 and "FusedGPT2Attention" or "GPT2Attention",
        sch["transformer.h.1.attn"].mod:type(), device)
      local expected_notes = (want_mlp and 0 or 1) + (ratios[device].attention < 1 and 0 or 1)
      eq(expected_notes, #notes, device .. ": one note per kernel left out, not per layer")
    end
    local _, notes = scheduled("gpt2", gpt2, { fuse = true, device = "cuda:0" })
    -- the note quotes the recorded ratio and where it was measured
    matches(("bias_gelu: %.2fx the unfused time on cuda %%(bench/kernels.lua"):format(ratios.cuda.bias_gelu):gsub("%.", "%%.", 1),
      notes[1])
  end)

  it("use every kernel with fuse = \"all\", and none on a device never measured", function()
    local sch, notes = scheduled("llama", llama, { fuse = "all", device = "cuda" })
    eq("FusedLlamaMLP", sch["model.layers.0.mlp"].mod:type())
    eq("FusedRMSNorm", sch["model.layers.0.input_layernorm"].mod:type())
    eq(0, #notes)
    sch, notes = scheduled("llama", llama, { fuse = true, device = "mps" })
    eq("LlamaMLP", sch["model.layers.0.mlp"].mod:type())
    matches("never measured on mps", notes[1])
    matches("fuse must be true .* or \"all\", got fast",
      select(2, pcall(scheduled, "llama", llama, { fuse = "fast" })))
  end)

  it("are recorded by bench/kernels.lua --record, rows sorted, other rows kept", function()
    local copy = os.tmpname()
    local f = assert(io.open(copy, "w"))
    f:write(assert(io.open(package.searchpath("slapo.kernel_ratios", package.path))):read("*a"))
    f:close()
    choices.record("xpu", { swiglu = 0.5, rms_norm = 1.5 }, "a test row", copy)
    local recorded = dofile(copy)
    os.remove(copy)
    assert(choices.wins("swiglu", "xpu:1", recorded))
    eq(false, (choices.wins("rms_norm", "xpu", recorded)))
    eq(ratios.cuda.attention, recorded.cuda.attention)
    eq(ratios.cpu.measured, recorded.cpu.measured)
  end)
end)
