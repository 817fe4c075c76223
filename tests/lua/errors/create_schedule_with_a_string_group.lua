-- expect: create_schedule: option 'group' must be a group (slapo.dist.new_group, slapo.dist.world() or a layout's tp_group, dp_group, pp_group), got the string 'world'
-- A schedule over the group "world" (a string): refused, naming the option and what a group is.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.create_schedule(model, { group = "world" }) end)
