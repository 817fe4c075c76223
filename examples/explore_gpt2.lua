-- A GPT-2 to explore at the prompt: `slapo-lua repl examples/explore_gpt2.lua` runs this first,
-- and its global names stay (`local` ones end with the script, as with `lua -i`):
--   slapo> sch["transformer.h.   <TAB>      completes the paths of the tree
--   slapo> print(sch["transformer.h.0.attn"])
--   slapo> print(model(ids))
slapo.manual_seed(0)
model = slapo.models.gpt2({ n_embd = 256, n_layer = 4, n_head = 8 })
sch = slapo.create_schedule(model)
ids = slapo.randint(0, 50257, { 2, 16 })
print("model, sch and ids are ready: try sch[\"transformer.h.0.attn\"] or print(sch)")
