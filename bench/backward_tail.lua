-- What backward holds above the model's state once gradients exist: the peak of step 2's forward and
-- backward (gradients kept, zeroed, from step 1; AdamW's moments made), for GPT-2 124M's shape with
-- its head tied to the embedding and untied, 1 and 12 layers, 4 x 64 tokens. The planner prices the
-- vocabulary matrix's new gradient from this (src/plan/cost_model.cpp; bench/RESULTS.md).
--   slapo-lua run bench/backward_tail.lua
local vocab, width = 50257, 768
print("| layers | head | step 2's forward + backward, MiB above the state | vocabulary matrix, MiB |")
print("|---|---|---|---|")
for _, case in ipairs({ { 1, true }, { 12, true }, { 1, false }, { 12, false } }) do
  slapo.manual_seed(0)
  local model = slapo.models.gpt2({ n_layer = case[1], tie_word_embeddings = case[2] })
  local ids = slapo.randint(0, vocab, { 4, 64 })
  local optimizer = slapo.optim.adamw(model, { lr = 1e-4 })
  local function step()
    optimizer:zero_grad()
    model(ids, { labels = ids }):backward()
  end
  step()
  optimizer:step()
  print(("| %d | %s | %.0f | %.0f |"):format(case[1], case[2] and "tied" or "untied", slapo.tensor_peak(step).mib,
    vocab * width * 4 / 2 ^ 20))
end
