-- expect: save: cannot create the directory '/proc/no/such/dir': No such file or directory
-- save to a directory that cannot be made: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
local model = must_fail.gpt2()
must_fail.refuses(model, function() slapo.save(model, "/proc/no/such/dir") end)
