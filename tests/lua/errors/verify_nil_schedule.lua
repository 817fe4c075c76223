-- expect: verify: bad argument #1: schedule expected, got nil
-- verify of nil: refused, and nothing changed.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.verify(nil, {}) end)
