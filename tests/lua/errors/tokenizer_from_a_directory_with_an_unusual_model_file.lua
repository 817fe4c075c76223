-- expect: tokenizer: /tmp/slapo-errors/checkpoint holds no tokenizer.json, tokenizer.model or spiece.model, but /tmp/slapo-errors/checkpoint/sentencepiece.bpe.model: if it is a SentencePiece model, give the file itself (/tmp/slapo-errors/checkpoint/sentencepiece.bpe.model)
-- A checkpoint directory whose SentencePiece model has a name of its own (XLM-R's
-- sentencepiece.bpe.model): refused, saying the file itself can be given.
local must_fail = require("slapo.must_fail")
os.execute("mkdir -p /tmp/slapo-errors/checkpoint")
assert(io.open("/tmp/slapo-errors/checkpoint/sentencepiece.bpe.model", "w")):close()
must_fail.refuses(nil, function() slapo.tokenizer("/tmp/slapo-errors/checkpoint") end)
