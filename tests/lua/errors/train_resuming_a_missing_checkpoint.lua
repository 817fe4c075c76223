-- expect: train: resume = '/nonexistent/step-000003' is not a checkpoint directory (resume = true takes checkpoint_dir's latest)
-- Resume from a checkpoint directory that does not exist: refused, not trained from scratch.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.train({ model = model, data = { vocab = 32, batch = 2, seq = 8 }, steps = 1, resume = "/nonexistent/step-000003" }) end)
