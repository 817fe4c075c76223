-- expect: fuse on 'transformer.h.0.mlp': unknown option 'compilr' (valid: compiler)
-- A misspelt fuse option is named.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:fuse(nil, { compilr = "kernels" }) end)
