-- expect: replace: the replacement for 'transformer.h.0.mlp' must be a module, got a schedule (its module is sch.mod) (build one with slapo.nn or slapo.nn.Module{...})
-- Replace given a schedule where its module is meant: refused, pointing at sch.mod.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:replace(sch["transformer.h.1.mlp"]) end)
