-- expect: sync: axis 3 for 'transformer.h.0.mlp' is out of range for its 3-d input (its last call; valid: -3 .. 2)
-- A scatter axis beyond the input of a module that has run: refused at the call, nothing changed.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
sch.mod(slapo.randint(0, 32, { 1, 4 }))
must_fail.refuses(sch, function() sch["transformer.h.0.mlp"]:sync("fwd_pre", "scatter", { axis = 3 }) end)
