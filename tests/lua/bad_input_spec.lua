-- Bad input, as a hostile user writes it: each call must raise an error that names the function,
-- what was wrong and the valid choices, and leave the schedule, its log and every parameter as
-- they were.
-- One bad call per file lives in tests/lua/errors (each checks its exact message and that nothing
-- changed, through slapo.must_fail); the cases here need several calls or check must_fail itself.
local must_fail = require("slapo.must_fail")

describe("bad calls on a schedule", function()
  it("a stale handle refuses every primitive, naming its path and what replaced its ancestor", function()
    local sch = must_fail.gpt2_schedule()
    local h = sch["transformer.h.0.mlp.c_fc"]
    sch["transformer.h.0.mlp"]:replace(slapo.nn.Identity())
    for _, call in ipairs({
      function() h:shard("weight", 1) end, function() h:sync("fwd_post", "all_reduce") end,
      function() h:checkpoint() end, function() h:annotate("x", 1) end, function() h:trace() end,
      function() h:replace(slapo.nn.Linear(16, 64)) end, function() h:fork_rng() end,
    }) do
      matches("the handle for 'transformer.h.0.mlp.c_fc' is stale: 'transformer.h.0.mlp' was replaced %(it is now "
        .. "Identity, which has no 'c_fc'%)", pcall_err(must_fail.refuses, sch, call))
    end
    -- a fresh handle to a live module still works
    sch["transformer.h.0.attn.c_attn"]:shard("weight", 1, { groups = 3 })
  end)
end)

describe("must_fail", function()
  it("passes a refused call's message on, and names a call that succeeded or changed something", function()
    local sch = must_fail.gpt2_schedule()
    eq("shard on 'transformer.h.0.mlp.c_fc': options must be a table, got string (e.g. {name = value})",
      pcall_err(must_fail.refuses, sch, function()
        sch["transformer.h.0.mlp.c_fc"]:shard("weight", 1, "groups=2")
      end))
    eq("must_fail: the call succeeded", pcall_err(must_fail.refuses, sch, function() end))
    matches("must_fail: the failed call changed the schedule log", pcall_err(must_fail.refuses, sch, function()
      sch["transformer.h.0.mlp.c_fc"]:shard("weight", 1)
      error("late")
    end))
    local model = must_fail.gpt2()
    matches("must_fail: the failed call changed parameter 'transformer.ln_f.weight'", pcall_err(must_fail.refuses, model,
      function()
        model.transformer.ln_f.weight:detach():add_(1)
        error("late")
      end))
  end)
end)

describe("errors from LibTorch", function()
  it("name the function that was called and the shapes of its tensor arguments", function()
    local t = slapo.randn({ 2, 3 })
    eq("view: shape '[3, 5]' is invalid for input of size 6 (tensor arguments: [2, 3])",
      pcall_err(function() local y = t:view({ 3, 5 }) return y end))
    matches("^matmul: .* %(tensor arguments: %[2, 3%], %[2, 3%]%)$",
      pcall_err(function() local y = t:matmul(t) return y end))
    matches("^layer_norm: Given normalized_shape=%[4%].* %(tensor arguments: %[2, 3%]%)$",
      pcall_err(function() local y = slapo.F.layer_norm(t, { 4 }) return y end))
    matches("^randn: Trying to create tensor with negative dimension %-1", pcall_err(slapo.randn, { -1, 2 }))
  end)
end)
