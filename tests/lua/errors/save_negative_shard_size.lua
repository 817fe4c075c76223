-- expect: save: max_shard_size must be a byte count >= 0 (0: one file), got -1
-- A negative shard size for save: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.save(model, os.tmpname() .. ".d", { max_shard_size = -1 }) end)
