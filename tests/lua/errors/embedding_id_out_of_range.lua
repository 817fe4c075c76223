-- expect: F.embedding: id 40 is out of range for 10 rows of the table (valid: 0 .. 9)
-- F.embedding with an id past the table: the id and the valid range are named.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function()
  slapo.F.embedding(slapo.tensor({ 40 }, { dtype = "int64" }), slapo.zeros({ 10, 4 }))
end)
