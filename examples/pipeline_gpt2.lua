-- A GPT-2 pipeline written out by hand: cut the layers into stages, build the pipeline, train.
--   slapo-lua run --nproc 2 examples/pipeline_gpt2.lua              # 2 stages, 1F1B
--   slapo-lua run --nproc 4 examples/pipeline_gpt2.lua              # 2 stages x 2 data-parallel replicas
local parallel = require("slapo.parallel")
local layout = parallel.layout({ tp = 1, pp = 2 })   -- rank = (stage * dp + dp rank) * tp + tp rank
print(layout)

slapo.manual_seed(0)                                  -- every rank builds the same model
local model = slapo.models.gpt2({ n_embd = 128, n_layer = 4, n_head = 4, vocab_size = 1024, n_positions = 64,
  resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
local sch = slapo.create_schedule(model, { group = layout.tp_group })
sch["transformer.h.1"]:cut_pipeline_stage()           -- stage 0: embeddings, h.0, h.1; stage 1: the rest
local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 4, schedule = "1f1b",
  dp_group = layout.dp_group } })

slapo.manual_seed(100 + layout.dp_rank)               -- each data-parallel replica its own batch
local ids = slapo.randint(0, 1024, { 8, 32 })
pipe:prepare(ids)                                     -- trace and split now, so parameters() is known
print(pipe)
local opt = slapo.optim.adamw(pipe:parameters(), { lr = 3e-3, weight_decay = 0 })
for step = 1, 5 do
  opt:zero_grad()
  local loss = pipe:step(ids, { labels = ids })       -- forward + backward of 4 micro-batches
  opt:step()
  local stats = pipe:stats()
  if slapo.dist.rank() == 0 then
    print(("step %d  loss %.4f  bubble %.2f (ideal %.2f)"):format(step, loss, stats.bubble, stats.ideal_bubble))
  end
end
