-- Builds a BERT model, walks its schedule tree and runs a forward pass.
--   slapo-lua run examples/inspect_bert.lua [preset]     (default: a 4-layer BERT-base width model)
local preset = arg[1]
local model
if preset then
  model = slapo.models.bert(preset)
else
  model = slapo.models.bert({ num_hidden_layers = 4 })
end
model:eval()

local sch = slapo.create_schedule(model)
print(sch)

-- Walk the first layer's attention by its Hugging Face path.
local attention = sch["bert.encoder.layer.0.attention.self"]
print(("\n%s is a %s with children:"):format(attention.path, attention.mod:type()))
for path, sub in attention:named_schedules() do
  local shape = sub.mod:type() == "Linear" and table.concat(sub.mod.weight:size(), "x") or ""
  print(("  %-8s %-10s %s"):format(path, sub.mod:type(), shape))
end

-- A forward pass on random token ids returns logits; with labels, the loss.
slapo.manual_seed(0)
local ids = slapo.randint(0, 30522, { 2, 16 })
local logits = model(ids)
print(("\nlogits: %s"):format(table.concat(logits:size(), " x ")))
local loss = model(ids, { labels = ids })
print(("loss on random tokens: %.4f (log(vocab) = %.4f)"):format(loss:item(), math.log(30522)))
print(("parameters: %d"):format(model:num_params()))
