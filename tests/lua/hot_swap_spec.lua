-- Swapping the schedule while training: at the next step boundary, weights and optimizer state
-- carried over by name, the loss curve unbroken; a broken edit keeps the running schedule.
local function make_model()
  slapo.manual_seed(0)
  return slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64, n_positions = 16,
    resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local ids = slapo.randint(0, 64, { 4, 8 })

local function run(schedule_path, edit)
  return slapo.train({ make_model = make_model, schedule_file = schedule_path, steps = 6, lr = 1e-2, quiet = true,
    data = function() return ids end,
    on_step = function(step) if step == 2 and edit then write(schedule_path, edit) end end })
end

describe("hot swap", function()
  it("applies an edited schedule at the next step and continues the same loss curve", function()
    local path = os.tmpname()
    write(path, "return function(sch) end\n")
    local plain = run(path, nil)
    write(path, "return function(sch) end\n")
    local swapped = run(path, "return function(sch) sch['transformer.h.0']:checkpoint() end\n")
    matches("checkpoint%(%)", swapped.schedule:log())
    for step = 1, 6 do
      eq(plain.losses[step], swapped.losses[step], "step " .. step)
    end
    os.remove(path)
  end)

  it("keeps the running schedule when the edit does not load or apply", function()
    local path = os.tmpname()
    write(path, "return function(sch) end\n")
    local plain = run(path, nil)
    write(path, "return function(sch) end\n")
    local broken = run(path, "return function(sch) sch['transformer.h.0.mpl']:checkpoint() end\n")
    matches("0 primitives", broken.schedule:log())
    eq(plain.final_loss, broken.final_loss)
    write(path, "return function(sch) end\n")
    local syntax = run(path, "return function(sch) sch:checkpoint( end\n")
    eq(plain.final_loss, syntax.final_loss)
    os.remove(path)
  end)

  it("stores the schedule log in training checkpoints", function()
    local path, dir = os.tmpname(), os.tmpname()
    os.remove(dir)
    write(path, "return function(sch) sch['transformer.h.1']:checkpoint() end\n")
    slapo.train({ make_model = make_model, schedule_file = path, steps = 2, quiet = true, checkpoint_dir = dir,
      checkpoint_every = 2, data = function() return ids end })
    local saved = io.open(dir .. "/step-000002/schedule.lua"):read("*a")
    matches('sch%["transformer%.h%.1"%]:checkpoint%(%)', saved)
    os.remove(path)
    os.execute("rm -rf " .. dir)
  end)

  it("names a schedule file that returns nothing usable", function()
    local path = os.tmpname()
    write(path, "x = 1\n")
    matches("a schedule file returns function%(sch%)", pcall_err(slapo.train, { make_model = make_model,
      schedule_file = path, steps = 1, quiet = true, data = function() return ids end }))
    os.remove(path)
  end)
end)
