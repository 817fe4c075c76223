-- expect: build: init_weights failed on the root (GPT2LMHeadModel): boom
-- An init_weights function that raises: named with the module it ran on, without a traceback through build.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() slapo.build(sch, { init_weights = function() error("boom", 0) end }) end)
