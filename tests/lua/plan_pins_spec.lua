-- slapo.plan around what a schedule (or pin = {...}) already chose: the plans keep the pins, and the
-- table says what they cost against the planner's choice without them.
local H100 = { cluster = "1x8:h100", batch = 16, seq = 1024 }

local function with(options, extra)
  local all = {}
  for key, value in pairs(options) do all[key] = value end
  for key, value in pairs(extra or {}) do all[key] = value end
  return all
end

local function gpt2_schedule()
  return slapo.create_schedule(slapo.models.gpt2("gpt2", { device = "meta" }))
end

describe("slapo.plan(sch) keeps the schedule's choices", function()
  it("keeps stages cut and layers checkpointed, and prices the plan without them beside", function()
    local sch = gpt2_schedule()
    for i = 0, 7 do sch["transformer.h." .. i]:checkpoint() end
    sch["transformer.h.7"]:cut_pipeline_stage()
    local logged = #sch:log_entries()
    local p = slapo.plan(sch, H100)
    eq("pp 2 (8c+4 layers)", p.pins)
    for _, alternative in ipairs(p.alternatives) do
      eq(2, #alternative.stages, alternative.name)
      eq({ 8, 4 }, { alternative.stages[1].layers, alternative.stages[2].layers }, alternative.name)
      eq({ true, false }, { alternative.stages[1].checkpoint, alternative.stages[2].checkpoint }, alternative.name)
    end
    eq("chosen", p.verdict)
    -- the planner alone would not pipeline this model on 8 GPUs: what the pins cost is stated
    eq(1, p.unpinned.pp)
    matches("without the pins; keeping them costs %d+%%", p.unpinned.verdict)
    assert(p.unpinned.step_s < p.step_s)
    matches("pinned: pp 2 %(8c%+4 layers%); the planner's choice without them:", tostring(p))
    matches("%-%- Pinned %(kept from the schedule or pin = {...}%): pp 2", p.source)
    assert(load(p.source), "the plan script does not compile")
    eq(logged, #sch:log_entries(), "planning left the schedule as it was")
  end)

  it("reads shard as tensor parallelism (any size on one rank) and fully_shard as its setting", function()
    local sharded = gpt2_schedule()
    sharded["transformer.h.0.attn.c_attn"]:shard("weight", 0)
    local p = slapo.plan(sharded, H100)
    eq("tensor parallel", p.pins)
    for _, alternative in ipairs(p.alternatives) do assert(alternative.tp >= 2, alternative.name) end
    local fully = gpt2_schedule()
    for i = 0, 11 do fully["transformer.h." .. i]:fully_shard({ reshard_after_forward = false }) end
    local q = slapo.plan(fully, H100)
    eq("zero-2", q.pins)
    for _, alternative in ipairs(q.alternatives) do matches("zero%-2$", alternative.name) end
    -- fully_shard's default (and an explicit true) reshards after forward: ZeRO-3 stays pinned
    for _, options in ipairs({ {}, { reshard_after_forward = true } }) do
      local zero3 = gpt2_schedule()
      for i = 0, 11 do zero3["transformer.h." .. i]:fully_shard(options) end
      zero3:fully_shard(options)
      local r = slapo.plan(zero3, H100)
      eq("fully sharded", r.pins)
      for _, alternative in ipairs(r.alternatives) do matches(", fully sharded$", alternative.name) end
    end
    local mixed = gpt2_schedule()
    mixed["transformer.h.0"]:fully_shard()
    mixed["transformer.h.1"]:fully_shard({ reshard_after_forward = false })
    matches("^plan: the schedule calls fully_shard with reshard_after_forward = false on transformer.h.1 %(.+%) and "
      .. "true before it; the planner prices one setting for every layer", pcall_err(slapo.plan, mixed, H100))
  end)

  it("lists a checkpoint of part of a layer as applied but not priced", function()
    local sch = gpt2_schedule()
    sch["transformer.h.0.attn"]:checkpoint()
    local p = slapo.plan(sch, H100)
    eq(nil, p.pins)
    eq(1, #p.unpriced)
    matches("^checkpoint of transformer.h.0.attn %(.*%): part of a layer$", p.unpriced[1])
  end)
end)

describe("slapo.plan{pin = ...}", function()
  it("keeps a pinned tensor-parallel size; pin laid over the schedule's pins wins", function()
    local p = slapo.plan("gpt2", with(H100, { pin = { tp = 4 } }))
    for _, alternative in ipairs(p.alternatives) do eq(4, alternative.tp, alternative.name) end
    local sch = gpt2_schedule()
    sch["transformer.h.0.attn.c_attn"]:shard("weight", 0)
    local q = slapo.plan(sch, with(H100, { pin = { tp = 2 } }))
    eq("tp 2", q.pins)
    eq(2, q.tp)
  end)

  it("says the pins cost nothing when the planner's own choice keeps them", function()
    local free = slapo.plan("gpt2", H100)
    local p = slapo.plan("gpt2", with(H100, { pin = { tp = free.tp, dp = free.dp, micro_batches = free.micro_batches } }))
    eq(free.name, p.name)
    eq("the same: the pins cost nothing", p.unpinned.verdict)
  end)

  it("pins each stage's checkpointing", function()
    local p = slapo.plan("gpt2", with(H100, { pin = { stages = { 5, 7 }, checkpoint = { false, true } } }))
    eq("pp 2 (5+7c layers)", p.pins)
    eq({ 5, 7 }, { p.stages[1].layers, p.stages[2].layers })
    eq({ false, true }, { p.stages[1].checkpoint, p.stages[2].checkpoint })
  end)
end)

describe("slapo.plan refuses pins it cannot keep", function()
  it("names the pin, what is wrong and the valid choices", function()
    eq("plan: no layout of 8 devices keeps the pins (tp 3): its plans have tp 1, 2, 4 and pp 1, 2, 4, 8, "
      .. "data parallelism dividing --batch 16", pcall_err(slapo.plan, "gpt2", with(H100, { pin = { tp = 3 } })))
    eq("plan: pinned stages (4+4) hold 8 layers; gpt2 has 12",
      pcall_err(slapo.plan, "gpt2", with(H100, { pin = { stages = { 4, 4 } } })))
    matches("^plan: pin: unknown option 'tpp' %(valid: tp, dp,",
      pcall_err(slapo.plan, "gpt2", with(H100, { pin = { tpp = 4 } })))
    eq("plan: pinned checkpointing names 2 stages, the pinned stages are 0",
      pcall_err(slapo.plan, "gpt2", with(H100, { pin = { checkpoint = { true, false } } })))
    eq("plan: pins ask for ZeRO-1 and fully sharded at once; a stage's replicas shard one way",
      pcall_err(slapo.plan, "gpt2", with(H100, { pin = { zero = true, fully_shard = true } })))
    eq("plan: pin.zero must be true or false, got number",
      pcall_err(slapo.plan, "gpt2", with(H100, { pin = { zero = 1 } })))
  end)

  it("refuses a schedule's choices the planner does not make", function()
    local sch = gpt2_schedule()
    for i = 0, 2 do sch["transformer.h." .. i]:checkpoint() end
    eq("plan: the schedule checkpoints 3 of transformer.h's 12 layers (0, 1, 2); the planner checkpoints every "
      .. "layer of a stage or none: checkpoint all of a stage's layers or none of them, or cut stages where the "
      .. "checkpointing changes", pcall_err(slapo.plan, sch, H100))
    local cut = gpt2_schedule()
    cut["transformer.wte"]:cut_pipeline_stage()
    matches("^plan: the schedule cuts a pipeline stage after transformer.wte %(.+%); the planner cuts stages only "
      .. "between the layers of transformer.h$", pcall_err(slapo.plan, cut, H100))
    eq("plan: give the model's schedule (sch), not the one of transformer.h",
      pcall_err(slapo.plan, gpt2_schedule()["transformer.h"], H100))
  end)
end)
