-- The planner at scale, simulated: GPT-3-style models (Alpa's evaluation sizes) on 8, 16, 32 and 64
-- H100s (8 per node, the measured stdlib/devices/h100.json), bf16, batch 1024 x seq 1024 as in
-- Alpa's GPT benchmark. Per row: the best of Megatron's uniform grid, the planner's choice (grid,
-- the inter-op program over one rank layout, or Alpa's program with a submesh per stage), Alpa's
-- program's plan (TPxDP:layers per stage; c checkpointed, s sequence parallel, z ZeRO-1), and how
-- long planning took: tracing one layer for the intra-op pass, then the whole search (the pass's
-- ILP solved for every mesh included). Predicted, not measured: every number is the cost model's.
--   slapo-lua run bench/plan_scale.lua [BATCH] [SEQ] [LAYER_COSTS]   (ilp, or megatron: no pass)
local batch, seq, layer_costs = tonumber(arg[1]) or 1024, tonumber(arg[2]) or 1024, arg[3] or "ilp"
local cases = {}
for _, model in ipairs({ "gpt3-1.3b", "gpt3-2.6b", "gpt3-6.7b", "gpt3-15b", "gpt3-39b" }) do
  for _, cluster in ipairs({ "1x8", "2x8", "4x8", "8x8" }) do
    cases[#cases + 1] = { model = model, cluster = cluster, batch = batch, seq = seq, dtype = "bfloat16" }
  end
end
-- where uneven stages pay off in one layout: a large vocabulary's head and logits on the last stage,
-- the first stage's 1F1B micro-batches in flight (float32, long sequences)
cases[#cases + 1] = { model = "Qwen2-0.5B", cluster = "1x4", batch = 64, seq = 8192, dtype = "float32" }
cases[#cases + 1] = { model = "gpt2", cluster = "1x4", batch = 512, seq = 1024, dtype = "float32" }

local function tflops(p, params, devices, c)
  -- 6 x parameters x tokens per step (forward and backward), per device
  return 6 * params * c.batch * c.seq / p.step_s / devices / 1e12
end

print(("GPT-3-style models on simulated H100s (h100.json), bfloat16, batch %d x seq %d unless named, %s"):format(
  batch, seq, os.date("%Y-%m-%d")))
print("| model | GPUs | best uniform (Megatron grid) | s/step | planner's plan | s/step | vs grid | " ..
  "submesh per stage (Alpa) | s/step | TFLOP/s/GPU | trace s | search s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for _, c in ipairs(cases) do
  local model, cluster = c.model, c.cluster
  local name = (c.batch == batch and c.seq == seq and c.dtype == "bfloat16") and model
    or ("%s (%d x %d, %s)"):format(model, c.batch, c.seq, c.dtype)
  do
    local ok, p = pcall(slapo.plan, model, { cluster = cluster .. ":h100", batch = c.batch, seq = c.seq,
      dtype = c.dtype, layer_costs = layer_costs })
    local devices = tonumber(cluster:match("^(%d+)x")) * tonumber(cluster:match("x(%d+)$"))
    if not ok then
      print(("| %s | %d | %s | | | | | | | | | |"):format(name, devices, tostring(p):gsub("\n.*", "")))
    else
      local grid
      for _, alt in ipairs(p.alternatives) do
        if alt.origin == "grid" and alt.fits then
          grid = alt
          break
        end
      end
      -- a submesh per stage: TPxDP:layers, "c" checkpointed, "s" sequence parallel, "z" ZeRO-1
      local function meshes(r)
        local out = {}
        for _, s in ipairs(r.stages) do
          out[#out + 1] = ("%dx%d:%d%s%s%s"):format(s.tp, s.dp, s.layers, s.checkpoint and "c" or "",
            s.sequence and "s" or "", s.zero and "z" or "")
        end
        return table.concat(out, " ")
      end
      local function describe(r)
        if r.origin == "alpa" then
          return ("%s, %d micro"):format(meshes(r), r.micro_batches)
        end
        local stages = {}
        for _, s in ipairs(r.stages) do
          stages[#stages + 1] = s.layers .. (s.checkpoint and "c" or "")
        end
        return ("tp %d x dp %d x pp %d (%s), %d micro%s"):format(r.tp, r.dp, r.pp, table.concat(stages, "+"),
          r.micro_batches, r.zero and ", zero" or "")
      end
      local alpa = p.unrestricted
      local alpa_text, alpa_s = "none fits", ""
      if alpa then
        alpa_text, alpa_s = meshes(alpa), ("%.3f"):format(alpa.step_s)
      end
      print(("| %s | %d | %s | %.3f | %s%s | %.3f | %.3fx | %s | %s | %.0f | %.2f | %.2f |"):format(name, devices,
        grid and describe(grid) or "none fits", grid and grid.step_s or 0, describe(p),
        p.origin == "grid" and "" or " (" .. p.origin .. ")", p.step_s, grid and grid.step_s / p.step_s or 0,
        alpa_text, alpa_s, tflops(p, p.parameters, devices, c), p.trace_s, p.search_s))
    end
  end
end
