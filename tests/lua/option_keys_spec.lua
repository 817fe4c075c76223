-- Every public function that takes an options table refuses a key it does not know, naming the
-- function, the key and the valid ones, rather than running with the misspelt option ignored.

local function gpt2()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 4, vocab_size = 64, n_positions = 16 })
end

local model = gpt2()
local ids = slapo.randint(0, 64, { 2, 8 })
local function sub(path) return slapo.create_schedule(gpt2())[path] end

-- name as the error names it, and a call with the options table `o`
local takers = {
  { "create_schedule", function(o) return slapo.create_schedule(model, o) end },
  { "build", function(o) return slapo.build(slapo.create_schedule(gpt2()), o) end },
  { "verify", function(o) return slapo.verify(slapo.create_schedule(gpt2()), { ids }, o) end },
  { "train", function(o)
    o.model, o.data, o.steps = model, { vocab = 64, batch = 2, seq = 8 }, 1
    return slapo.train(o)
  end },
  { "optim.adamw", function(o) return slapo.optim.adamw(model, o) end },
  { "optim.sgd", function(o) return slapo.optim.sgd(model, o) end },
  { "zeros", function(o) return slapo.zeros({ 2 }, o) end },
  { "randn", function(o) return slapo.randn({ 2 }, o) end },
  { "models.gpt2", function(o) return slapo.models.gpt2({ n_embd = 32, n_layer = 1, n_head = 4 }, o) end },
  { "models.from_pretrained", function(o) return slapo.models.from_pretrained("/nonexistent", o) end },
  { "save", function(o) return slapo.save(model, os.tmpname(), o) end },
  { "parallel.layout", function(o)
    o.tp = 1
    return require("slapo.parallel").layout(o)
  end },
  { "dist.data_parallel", function(o) return slapo.dist.data_parallel(model, o) end },
  { "shard on 'transformer.h.0.mlp.c_fc'", function(o) return sub("transformer.h.0.mlp.c_fc"):shard("weight", 1, o) end },
  { "sync on 'transformer.h.0.mlp.c_fc'", function(o)
    return sub("transformer.h.0.mlp.c_fc"):sync("fwd_post", "all_reduce", o)
  end },
  { "fully_shard on 'transformer.h.0'", function(o) return sub("transformer.h.0"):fully_shard(o) end },
  { "trace on 'transformer.h.0.mlp'", function(o) return sub("transformer.h.0.mlp"):trace(o) end },
  { "plan", function(o) return slapo.plan(model, o) end },
  { "autoshard", function(o) return slapo.autoshard(sub("transformer.h.0"), o) end },
  { "kernels.bias_gelu", function(o) return slapo.kernels.bias_gelu(slapo.ones({ 2, 2 }), slapo.ones({ 2 }), o) end },
  { "kernels.attention", function(o)
    local q = slapo.randn({ 1, 1, 2, 4 })
    return slapo.kernels.attention(q, q, q, o)
  end },
  { "kernels.bias_dropout_add_layer_norm", function(o)
    local x, v = slapo.randn({ 2, 4 }), slapo.ones({ 4 })
    return slapo.kernels.bias_dropout_add_layer_norm(x, v, x, v, v, o)
  end },
  { "run_process", function(o) return slapo.run_process({ "true" }, o) end },
  { "knob 'option_keys_spec'", function(o) return slapo.knob("option_keys_spec", { 1, 2 }, 1, o) end },
}

describe("options tables", function()
  it("are refused with an unknown key, naming the function, the key and the valid keys", function()
    for _, taker in ipairs(takers) do
      local name, call = taker[1], taker[2]
      local ok, err = pcall(call, { misspelt_option = 1 })
      assert(not ok, name .. " accepted an unknown option")
      matches(name:gsub("%p", "%%%0") .. ": unknown option 'misspelt_option' %(", tostring(err))
    end
  end)
end)
