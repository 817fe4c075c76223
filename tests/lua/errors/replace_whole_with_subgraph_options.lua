-- expect: replace: options ({check =, name =}) go with a subgraph, sub:replace(m, subgraph, {...}); replacing 'transformer.h.0.mlp' whole takes none
-- Replacing a whole module with options that go with a subgraph: refused, not ignored.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:replace(slapo.nn.Identity(), nil, { chek = false }) end)
