--- `slapo-lua inspect MODEL`: prints a model's module tree and parameter count.
--- MODEL is a preset name (built on the meta device: shapes only, no memory), a Hugging Face
--- model directory (config.json + safetensors), or a TorchScript .pt file.
---
--- Example: slapo-lua inspect gpt2
---   GPT2LMHeadModel  124,439,808 params
---     (transformer) GPT2Model  124,439,808 params
---       (transformer.wte) Embedding(50257, 768)  weight [50257, 768]
---       ...
local M = {}

local function is_dir(path)
  local f = io.open(path .. "/config.json", "r")
  if f then
    f:close()
    return true
  end
  return false
end

local with_commas = require("slapo.util").with_commas

function M.open(name)
  if name:match("%.pt$") or name:match("%.pth$") then
    return slapo.load(name)
  elseif is_dir(name) then
    return slapo.models.from_pretrained(name)
  elseif name:find("/", 1, true) then  -- a path, not a preset name
    error(("inspect: '%s' is neither a model directory nor a .pt file (a preset name has no '/')"):format(name), 0)
  end
  return slapo.models.build(name, { device = "meta" })
end

function M.main(name)
  local model = M.open(name)
  print(tostring(model))
  print(("%s parameters"):format(with_commas(model:num_params())))
end

return M
