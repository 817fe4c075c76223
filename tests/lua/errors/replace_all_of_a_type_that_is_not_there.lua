-- expect: replace_all: no module of type 'Conv1d' under the model (its types: Conv1D, Dropout, Embedding, GPT2Attention, GPT2Block, GPT2MLP, GPT2Model, LayerNorm, Linear, ModuleList, NewGELUActivation)
-- Replace_all of a type no module has (a misspelling): refused, naming the types there are, and nothing changed.
local must_fail = require("slapo.must_fail")
local sch = must_fail.gpt2_schedule()
must_fail.refuses(sch, function() sch:replace_all("Conv1d", function() return slapo.nn.GELU() end) end)
