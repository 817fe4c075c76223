-- expect: dist.all_reduce: argument 2 (the form is dist.all_reduce(tensor [, group]), a sum in place) must be a group (slapo.dist.new_group, slapo.dist.world() or a layout's tp_group, dp_group, pp_group), got the string 'max'
-- All-reduce given an op name where the group goes: refused, saying the form (a sum).
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.dist.all_reduce(slapo.zeros({ 2 }), "max") end)
