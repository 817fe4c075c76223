-- expect: train: checkpoint_dir = '/proc/slapo-ckpt' cannot be created or written
-- Checkpoints into a directory that cannot be made: refused before a step changes the model.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8 }, steps = 1, quiet = true, checkpoint_dir = "/proc/slapo-ckpt", checkpoint_every = 1 }) end)
