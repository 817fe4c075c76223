-- expect: optim.adamw: the array of parameters is empty (give a module, or an array of its tensors)
-- optim.adamw({}): an optimizer over no parameters is refused.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.optim.adamw({}, { lr = 1e-3 }) end)
