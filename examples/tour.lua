-- The README's tour, runnable: slapo-lua run examples/tour.lua (or with --nproc 2).
slapo.manual_seed(0)                         -- every rank builds the same model
local model = slapo.models.gpt2({ n_embd = 256, n_layer = 4, n_head = 8 })  -- HF config.json fields
-- or a preset: slapo.models.llama("TinyLlama-1.1B"), slapo.models.bert("bert-base-uncased")
-- or a checkpoint: slapo.models.from_pretrained("path/to/hf_dir"); slapo.load("model.pt")

local sch = slapo.create_schedule(model)
print(sch)                                   -- tree: types, shapes, counts, repeated layers collapsed
local attn = sch["transformer.h.0.attn"]     -- PyTorch's dotted paths; typos name the closest child
print(attn.path, attn.mod:type())            -- transformer.h.0.attn   GPT2Attention
for path, sub in attn:named_schedules() do print(path, sub.mod:type()) end

local ids = slapo.randint(0, 50257, { 2, 64 })
local loss = model(ids, { labels = ids })    -- logits without labels
loss:backward()
print(loss:item(), model:num_params())

local block = slapo.nn.Module{ type = "MyBlock", children = { fc = slapo.nn.Linear(256, 256) },
  forward = function(self, x) return slapo.F.relu(self.fc(x)) end }
print(block(slapo.randn({ 2, 256 })):size()[2])
local out = os.tmpname()
os.remove(out)
slapo.save(model, out)                       -- config.json + model.safetensors, loads in HF
os.execute("rm -rf " .. out)

-- Megatron tensor parallelism by hand (or require("slapo.schedules.gpt2").schedule(sch)):
slapo.verify(sch, { ids }, {}, function(sch)
  local mlp = sch["transformer.h.0.mlp"]
  mlp["c_fc"]:shard("weight", 1):shard("bias", 0):sync("bwd_post", "all_reduce")
  mlp["c_proj"]:shard("weight", 0):sync("fwd_post", "all_reduce")
end)                                         -- outputs and gathered gradients equal the original
print(sch:log())                             -- the applied primitives as replayable Lua
