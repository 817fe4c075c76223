-- expect: config: model_type is missing: name one of bert, roberta, albert, t5, gpt2, gpt_neo, opt, llama, qwen2, mistral, mixtral, mlp (or build with slapo.models.gpt2{...} and its siblings)
-- A config with no model_type: refused, saying it is missing.
local must_fail = require("slapo.must_fail")
must_fail.refuses(nil, function() slapo.models.build({ n_embd = 16 }) end)
