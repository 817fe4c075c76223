--- slapo: the schedule language. The C++ core (slapo.core) provides tensors, modules, models and
--- schedules; this file adds what is simpler in Lua.
---
--- Example usage:
---   local model = slapo.models.gpt2("gpt2")
---   local sch = slapo.create_schedule(model)
---   print(sch["transformer.h.0.attn"])
local core = require("slapo.core")

local slapo = {}
for name, value in pairs(core) do
  slapo[name] = value
end

slapo.nn = {}
for name, value in pairs(core.nn) do
  if name ~= "lua_module" then
    slapo.nn[name] = value
  end
end

--- A module written in Lua.
---   slapo.nn.Module{ type = "MyBlock", children = {fc = slapo.nn.Linear(4, 4)},
---                    params = {scale = slapo.ones{4}},
---                    forward = function(self, x) return slapo.F.relu(self.fc(x)) * self.scale end }
function slapo.nn.Module(spec)
  if type(spec) ~= "table" then
    error("nn.Module: expected a table {type=, children=, params=, forward=}, got " .. type(spec), 2)
  end
  local allowed = { type = true, children = true, params = true, forward = true }
  for key in pairs(spec) do
    if not allowed[key] then
      error(("nn.Module: unknown field '%s' (fields: type, children, params, forward)"):format(tostring(key)), 2)
    end
  end
  if type(spec.forward) ~= "function" then
    error("nn.Module: 'forward' must be a function(self, ...), got " .. type(spec.forward), 2)
  end
  if spec.type ~= nil and type(spec.type) ~= "string" then
    error("nn.Module: 'type' must be a string, got " .. type(spec.type), 2)
  end
  return core.nn.lua_module(spec.type or "LuaModule", spec.children or {}, spec.params or {}, spec.forward)
end

return slapo
