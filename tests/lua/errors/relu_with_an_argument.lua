-- expect: nn.ReLU: takes 0 arguments, got 1 (the form is nn.ReLU())
-- nn.ReLU(5): the argument is refused, not ignored.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.nn.ReLU(5) end)
