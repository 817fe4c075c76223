-- The REPL's Lua half: evaluation of complete and incomplete chunks, and completion.
local repl = require("slapo.repl")

describe("repl eval", function()
  it("prints expressions without =, runs statements, and asks for more lines", function()
    eq({ "ok", "3" }, { repl.eval("1 + 2") })
    eq({ "ok", "" }, { repl.eval("repl_spec_x = 5") })
    eq({ "ok", "5\thi" }, { repl.eval("repl_spec_x, 'hi'") })
    eq("incomplete", repl.eval("function f()"))
    eq("incomplete", repl.eval("x = {1,"))
    -- an expression cut after an operator continues on the next line, as in Lua 5.3's REPL
    eq("incomplete", repl.eval("1 +"))
    eq({ "ok", "42" }, { repl.eval("1 +\n41") })
    local status, text = repl.eval("error('bad')")
    eq("error", status)
    matches("bad", text)
    eq({ "error", "stdin:1: unexpected symbol near ')'" }, { repl.eval("x = )") })
  end)

  it("keeps a line's top-level locals for the lines after, so snippets paste as written", function()
    eq({ "ok", "" }, { repl.eval("local pasted_a, pasted_b = 7, 8") })
    eq({ "ok", "7\t8" }, { repl.eval("pasted_a, pasted_b") })
    eq("incomplete", repl.eval("local function pasted_f(x)"))
    eq({ "ok", "" }, { repl.eval("local function pasted_f(x)\n  local inner = x + 1\n  return inner\nend") })
    eq({ "ok", "3" }, { repl.eval("pasted_f(2)") })
    eq({ "ok", "true" }, { repl.eval("inner == nil") }, "a local inside a function stays local")
  end)

  it("shows errors without frames that are only an address", function()
    local status, text = repl.eval("error('boom')")
    eq("error", status)
    matches("boom", text)
    assert(not text:find(": at 0x"), text)
  end)
end)

describe("repl completion", function()
  it("completes globals, fields, methods and module paths", function()
    -- the REPL evaluates in the real globals, not in this spec's environment
    _G.repl_model = slapo.models.gpt2("gpt2", { device = "meta" })
    _G.repl_sch = slapo.create_schedule(_G.repl_model)
    eq({ "repl_model" }, repl.complete("repl_m", "repl_m"))
    eq({ "repl_sch", "repl_spec_x" }, repl.complete("x = repl_s", "repl_s"))
    eq({ "slapo.models" }, repl.complete("slapo.mod", "slapo.mod"))
    eq({ "repl_sch:children" }, repl.complete("repl_sch:chi", "repl_sch:chi"))
    eq({ "transformer.h.0.attn" }, repl.complete('repl_sch["transformer.h.0.at', "transformer.h.0.at"))
    local layers = repl.complete('repl_sch["transformer.h.', "transformer.h.")
    eq(12, #layers)
    eq({ "transformer.h.0", "transformer.h.1", "transformer.h.2" }, { unpack(layers, 1, 3) })  -- module order
    eq({}, repl.complete("nothing_here.x", "nothing_here.x"))
  end)

  it("offers slapo's public names, not the host helpers the stdlib uses", function()
    local offered = {}
    for _, name in ipairs(repl.complete("slapo.", "slapo.")) do
      offered[name] = true
    end
    assert(offered["slapo.build"] and offered["slapo.train"] and offered["slapo.dist"], "the public API is offered")
    for _, internal in ipairs({ "executable", "machine", "file_hash", "file_mtime", "source_dir", "stdout_is_terminal",
      "_verify", "_executable" }) do
      assert(not offered["slapo." .. internal], "slapo." .. internal .. " is offered")
    end
  end)
end)
