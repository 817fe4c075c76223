-- expect: replace: cannot put an ancestor ('the root', a Sequential) inside itself at '0.0': the new Sequential contains it
-- A module put inside itself: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local inner = slapo.nn.Sequential({ slapo.nn.Linear(2, 2) })
local outer = slapo.nn.Sequential({ inner })
local sch = slapo.create_schedule(outer)
must_fail.refuses(sch, function() sch["0.0"]:replace(slapo.nn.Sequential({ outer })) end)
