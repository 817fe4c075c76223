-- expect: tokenizer: /tmp/slapo-errors/notes.txt is not a tokenizer file (neither JSON nor named *.model); slapo-lua reads tokenizer.json (a byte-level BPE such as LLaMA-3's or GPT-2's, BPE over characters such as LLaMA-2's, or WordPiece such as BERT's), SentencePiece's tokenizer.model or spiece.model (any *.model file), or a directory holding one of them or GPT-2's encoder.json and vocab.bpe
-- A text file given as the tokenizer: refused, naming the files slapo-lua reads.
local must_fail = require("slapo.must_fail")
os.execute("mkdir -p /tmp/slapo-errors")
local f = assert(io.open("/tmp/slapo-errors/notes.txt", "w"))
f:write("not a tokenizer\n")
f:close()
must_fail.refuses(nil, function() slapo.tokenizer("/tmp/slapo-errors/notes.txt") end)
