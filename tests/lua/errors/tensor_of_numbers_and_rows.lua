-- expect: tensor: entry 3 at depth 1 is a row where entry 1 is a number (every entry of a level is a number, or every one a row)
-- A tensor from {1, 2, {3}}: refused, not shaped [3, 1].
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.tensor({ 1, 2, { 3 } }) end)
