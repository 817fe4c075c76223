-- expect: Embedding: token id -1 is out of range for a table of 32 rows (ids from 0 to 31)
-- A negative token id: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() model(slapo.tensor({ { 1, -1 } }, { dtype = "int64" })) end)
