-- Pipelines with context parallelism inside each stage (pp 2 x cp 2 on 4 ranks): each cp rank keeps
-- its tokens from the first stage on, what crosses a cut is its share of the sequence, the last
-- stage computes the whole sequence's loss over the cp group, and the gradients averaged over the
-- pipeline's dp_group (the cp group) equal one process's; 3 AdamW steps in loss, gradients and
-- weights, by the ring and by all_to_all, for LLaMA and GPT-2, 1F1B and GPipe.
local parallel = require("slapo.parallel")
local world = slapo.dist.world_size()
-- helpers shared by the multi-rank specs (tests/dist/one_rank_reference.lua), in this spec's environment
local reference = setfenv(assert(loadfile((debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or ".")
  .. "/one_rank_reference.lua")), getfenv(1))()

local configs = {
  llama = { hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 64, vocab_size = 64, max_position_embeddings = 256 },
  gpt2 = { n_embd = 32, n_layer = 4, n_head = 4, vocab_size = 64, n_positions = 256, resid_pdrop = 0, embd_pdrop = 0,
    attn_pdrop = 0 },
}
local layers = { llama = "model.layers", gpt2 = "transformer.h" }

local function build(kind)
  slapo.manual_seed(21)
  return slapo.models[kind](configs[kind])
end

-- the same rows on every rank
local function batch(rows, seq)
  slapo.manual_seed(9)
  return slapo.randint(0, 64, { rows, seq }) -- seeded alike on every rank
end

local function pipelined(kind, method, schedule)
  local layout = parallel.layout({ pp = 2, cp = 2 })
  local sch = slapo.create_schedule(build(kind), { group = layout.tp_group })
  sch:context_parallel({ group = layout.cp_group, method = method })
  parallel.cut_evenly(sch, layers[kind], 2)
  return slapo.build(sch, { pipeline = { group = layout.pp_group, dp_group = layout.dp_group, schedule = schedule,
    micro_batches = 2 } })
end

describe("pipelines with context_parallel", function()
  if world ~= 4 then
    it("needs 4 ranks (pp 2 x cp 2)", function() skip("run with --nproc 4") end)
    return
  end
  for _, case in ipairs({ { "llama", "ring", "1f1b" }, { "llama", "all_to_all", "gpipe" }, { "gpt2", "ring", "gpipe" } }) do
    local kind, method, schedule = case[1], case[2], case[3]
    it(("trains %s as one process: pp 2 x cp 2, %s, %s"):format(kind, method, schedule), function()
      local ids = batch(4, 64)
      local pipe, ref = pipelined(kind, method, schedule), build(kind)
      reference.pipeline_steps_as_one_process(pipe, ref, ids, "pipelined and split")
      -- AdamW divides by each gradient's own scale: near-zero gradients' rounding (a different order of
      -- float32 sums) moves their updates by up to a small part of lr = 1e-2 (1.2e-4 seen; the
      -- gradients above agree every step)
      local theirs = reference.named(ref)
      for name, p in pipe:named_parameters() do close(theirs[name], p, { rtol = 1e-4, atol = 3e-4 }) end
    end)
  end

  it("verifies against the unscheduled model: the whole sequence's loss, every stage gradient", function()
    local layout = parallel.layout({ pp = 2, cp = 2 })
    local sch = slapo.create_schedule(build("llama"), { group = layout.tp_group })
    local report = slapo.verify(sch, { batch(4, 64) },
      { pipeline = { group = layout.pp_group, dp_group = layout.dp_group, micro_batches = 2 } }, function(s)
        s:context_parallel({ group = layout.cp_group })
        parallel.cut_evenly(s, "model.layers", 2)
      end)
    eq(1, report.outputs)
    assert(report.gradients > 10, "compared " .. report.gradients .. " gradients")
  end)

  it("refuses what would be wrong with it, by name", function()
    local layout = parallel.layout({ pp = 2, cp = 2 })
    local function split_cut()
      local sch = slapo.create_schedule(build("llama"), { group = layout.tp_group })
      sch:context_parallel({ group = layout.cp_group })
      parallel.cut_evenly(sch, "model.layers", 2)
      return sch
    end
    matches("pipeline.loss would see this rank's tokens' logits alone", pcall_err(slapo.build, split_cut(),
      { pipeline = { group = layout.pp_group, dp_group = layout.dp_group, loss = function(logits) return logits:sum() end } }))
    matches("averaged over pipeline.dp_group, which must hold the cp group's ranks", pcall_err(slapo.build, split_cut(),
      { pipeline = { group = layout.pp_group } }))
  end)
end)
