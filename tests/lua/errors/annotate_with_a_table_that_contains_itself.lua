-- expect: annotate on 'transformer.h.0.mlp.c_fc': value: a table nested more than 64 levels deep (does it contain itself?)
-- Annotate with a value that contains itself: refused instead of overflowing the stack.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
local loop = {}
loop.self = loop
must_fail.refuses(sch, function() sch["transformer.h.0.mlp.c_fc"]:annotate("weight", "note", loop) end)
