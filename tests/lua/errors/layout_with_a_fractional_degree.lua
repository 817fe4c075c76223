-- expect: parallel.layout: tp must be a whole number of at least 1, got 1.5
-- A rank layout with tp = 1.5: refused as not a whole number.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() require("slapo.parallel").layout({ tp = 1.5 }) end)
