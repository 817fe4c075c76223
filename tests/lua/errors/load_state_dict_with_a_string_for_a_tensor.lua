-- expect: load_state_dict: the value of 'lm_head.weight' must be a tensor, got string
-- Load_state_dict with a string where a tensor belongs: refused by name, the module unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch.mod:load_state_dict({ ["lm_head.weight"] = "str" }) end)
