-- expect: create_schedule: bad argument #1: module expected, got nil
-- create_schedule of nil: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.create_schedule(nil) end)
