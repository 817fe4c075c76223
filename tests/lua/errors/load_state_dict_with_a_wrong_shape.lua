-- expect: load_state_dict: 'lm_head.weight' has shape [32, 16] in the module but [2, 2] in the table
-- Load_state_dict with a wrong shape: refused, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  sch.mod:load_state_dict({ ["lm_head.weight"] = slapo.zeros({ 2, 2 }) })
end)
