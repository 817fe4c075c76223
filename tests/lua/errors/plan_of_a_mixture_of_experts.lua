-- expect: plan: a mixture of experts (mixtral) is not priced yet: its experts' memory over the expert-parallel ranks and its all-to-all traffic are not in the cost model; lay it out by hand with slapo.parallel.layout{tp =, ep =} and slapo.schedules.mixtral (docs/primitives.md, shard_experts)
-- slapo.plan of Mixtral: refused with what to do instead, not planned as a dense LLaMA.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() return slapo.plan("Mixtral-8x7B-v0.1") end)
