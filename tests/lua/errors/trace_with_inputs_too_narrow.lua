-- expect: trace: tracing 'transformer.h.0.mlp' failed: in 'transformer.h.0.mlp.c_fc': Conv1D: the input's last dimension is 8, expected 16 (in_features); input shape [2, 4, 8]
-- A trace on inputs of the wrong width: the leaf that refused them is named, with both widths.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:trace({ inputs = { slapo.randn({ 2, 4, 8 }) } }) end)
