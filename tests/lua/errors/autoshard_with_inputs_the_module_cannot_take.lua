-- expect: autoshard: trace: tracing 'transformer.h.0' failed: in 'transformer.h.0.ln_1': Given normalized_shape=[16], expected input with shape [*, 16], but got input of size[1, 8, 32] (inputs: the module's own last inputs, or {inputs = {x, ...}})
-- Autoshard with example inputs the layer cannot take (32 features for a 16-wide layer): the
-- tracer's refusal, named, and the schedule, its log and its parameters unchanged.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function()
  slapo.autoshard(sch["transformer.h.0"], { inputs = { slapo.randn({ 1, 8, 32 }) } })
end)
