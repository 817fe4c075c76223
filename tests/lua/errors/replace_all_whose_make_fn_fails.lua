-- expect: replace_all: make_fn failed for 'transformer.h.0.mlp.c_fc': no kernel for transformer.h.0.mlp.c_fc
-- Replace_all whose make_fn raises on a later module: refused with the path, and the modules before it not swapped.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() local n = 0; sch:replace_all("Conv1D", function(path) n = n + 1; if n == 3 then error("no kernel for " .. path, 0) end; return slapo.nn.Linear(16, 16) end) end)
