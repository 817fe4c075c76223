-- expect: cat: every entry of the table must be a tensor, got number
-- cat of a list holding a number: no Lua position (#-1) in the message.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.cat({ slapo.zeros({ 2 }), 5 }) end)
