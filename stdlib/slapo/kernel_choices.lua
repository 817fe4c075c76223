--- Which fused kernels to use on a device: the ones bench/kernels.lua measured faster than the
--- unfused ATen ops there (slapo.kernel_ratios). The reference schedules' fuse = true asks here,
--- so a fused schedule does not put a kernel in where it would make the step slower.
---
--- Example usage:
---   local choices = require("slapo.kernel_choices")
---   local ok, why = choices.wins("bias_gelu", "cpu")   -- false, "bias_gelu: 1.08x the unfused time on cpu (...)"
local M = {}

M.kernels = { "bias_gelu", "rms_norm", "swiglu", "masked_softmax", "bias_dropout_add_layer_norm", "attention" }

local function ratios()
  package.loaded["slapo.kernel_ratios"] = nil  -- a --record in this process is seen
  return require("slapo.kernel_ratios")
end

--- "cuda:0" -> "cuda"
function M.device_type(device)
  return (tostring(device):match("^(%a+)"))
end

--- true when `kernel` ran faster than its unfused ops on `device`'s type; else false and why.
--- A device never measured uses none. `table`: ratios to read instead of slapo.kernel_ratios.
function M.wins(kernel, device, table)
  local kind = M.device_type(device)
  local row = (table or ratios())[kind]
  if not row then
    return false, ("%s: never measured on %s (run bench/kernels.lua --device %s --record)"):format(kernel, kind, kind)
  end
  local ratio = row[kernel]
  if not ratio then
    return false, ("%s: no measurement on %s"):format(kernel, kind)
  end
  if ratio >= 1 then
    return false, ("%s: %.2fx the unfused time on %s (%s)"):format(kernel, ratio, kind, row.measured)
  end
  return true
end

--- The device a model's parameters live on ("cpu" for a model without any).
function M.model_device(model)
  local params = model:parameters()
  return params[1] and params[1]:device() or "cpu"
end

--- Rewrites `kind`'s row of the ratios file (slapo.kernel_ratios, or `path`) with `measured`
--- ({kernel = ratio}) and a `note`; returns the path.
function M.record(kind, measured, note, path)
  path = path or assert(package.searchpath("slapo.kernel_ratios", package.path), "slapo.kernel_ratios not found")
  local all = dofile(path)
  all[kind] = { measured = note }
  for kernel, ratio in pairs(measured) do
    all[kind][kernel] = ratio
  end
  local lines = { "-- Fused / unfused time (forward + backward) of each slapo.kernels op against the ATen ops it",
    "-- replaces, by device type, as bench/kernels.lua measured them; `--record` rewrites a device's",
    "-- row. slapo.kernel_choices reads it.", "return {" }
  local kinds = {}
  for k in pairs(all) do kinds[#kinds + 1] = k end
  table.sort(kinds)
  for _, k in ipairs(kinds) do
    lines[#lines + 1] = ("  %s = {"):format(k)
    lines[#lines + 1] = ("    measured = %q,"):format(all[k].measured or "")
    for _, kernel in ipairs(M.kernels) do
      if all[k][kernel] then
        lines[#lines + 1] = ("    %s = %.2f,"):format(kernel, all[k][kernel])
      end
    end
    lines[#lines + 1] = "  },"
  end
  lines[#lines + 1] = "}"
  local f = assert(io.open(path, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  return path
end

return M
