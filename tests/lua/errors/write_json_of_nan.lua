-- expect: write_json: 'loss' is NaN, which JSON cannot hold
-- write_json of NaN: refused (JSON has none), not written as null.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.write_json("/tmp/slapo-must-fail.json", { loss = 0 / 0 }) end)
