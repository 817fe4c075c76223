-- expect: cat: dim must be an integer from -64 to 63, got 0.5
-- cat on dim 0.5: refused, not truncated to dim 0.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.cat({ slapo.ones({ 2 }), slapo.ones({ 2 }) }, 0.5) end)
