--- Small helpers the standard library's modules share.
local M = {}

--- 1234567 -> "1,234,567" (rounded to an integer).
function M.with_commas(n)
  local s = string.format("%d", math.floor(n + 0.5))
  return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

--- The whole file, or nil when it cannot be read.
function M.read_file(path)
  local f = io.open(path, "r")
  if not f then
    return nil
  end
  local text = f:read("*a")
  f:close()
  return text
end

--- Writes `text` as the whole file (raises when it cannot be opened).
function M.write_file(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

--- True when `path` names a directory: it opens, but reading it fails with EISDIR (21).
function M.is_directory(path)
  local f = io.open(path, "r")
  if not f then
    return false
  end
  local ok, _, code = f:read(0)
  f:close()
  return ok == nil and code == 21
end

--- Refuses options that are not a table or hold a key not in `valid` (an array of names), naming
--- `fn` and the valid keys: a misspelt option would otherwise be ignored. `level` as error's.
function M.check_options(opts, valid, fn, level)
  if opts == nil then
    return
  end
  if type(opts) ~= "table" then
    error(("%s: options must be a table like {%s = ...}, got %s"):format(fn, valid[1], type(opts)), level + 1)
  end
  local known = {}
  for _, k in ipairs(valid) do
    known[k] = true
  end
  for k in pairs(opts) do
    if not known[k] then
      error(("%s: unknown option '%s' (valid: %s)"):format(fn, tostring(k), table.concat(valid, ", ")), level + 1)
    end
  end
end

--- Refuses anything but a whole number of at least 1 (NaN, fractions, strings), naming it.
function M.check_count(value, what, fn, level)
  if type(value) ~= "number" or value ~= value or value < 1 or value ~= math.floor(value) or value > 2 ^ 31 then
    error(("%s: %s must be a whole number of at least 1, got %s"):format(fn, what, tostring(value)), level + 1)
  end
end

local usage_error_meta = {
  __slapo_no_traceback = true,  -- src/lua/runtime.cpp's lx_traceback reads it
  __tostring = function(e) return e.message end,
}

--- Raises `message` at `level` (as error() does) as a mistake on the command line: reported without a
--- stack traceback, which would run through slapo's own files and say nothing about the mistake.
--- Lua code that catches it gets a table; tostring() gives the message.
function M.usage_error(message, level)
  local info = debug.getinfo(level + 1, "Sl")
  local where = info and info.currentline > 0 and (info.short_src .. ":" .. info.currentline .. ": ") or ""
  error(setmetatable({ message = where .. message }, usage_error_meta), 0)
end

--- What a value is, for errors: "a module", "a schedule", "a tensor", "an optimizer", else Lua's
--- type name ("userdata" says nothing to a user).
function M.describe(value)
  local meta = type(value) == "userdata" and getmetatable(value)
  local name = meta and meta.__name
  local kinds = { ["slapo.Module"] = "a module", ["slapo.Schedule"] = "a schedule", ["slapo.Tensor"] = "a tensor",
    ["slapo.Optimizer"] = "an optimizer", ["slapo.Group"] = "a group" }
  return kinds[name] or name or type(value)
end

--- True for a slapo.Pipeline (what slapo.build returns for a schedule with cut stages).
function M.is_pipeline(value)
  return type(value) == "userdata" and (getmetatable(value) or {}).__name == "slapo.Pipeline"
end

--- A list of ranks as "{0, 1}".
function M.ranks_text(ranks)
  return "{" .. table.concat(ranks, ", ") .. "}"
end

--- True when two arrays hold equal elements in the same order.
function M.same_array(a, b)
  if #a ~= #b then
    return false
  end
  for i = 1, #a do
    if a[i] ~= b[i] then
      return false
    end
  end
  return true
end

return M
