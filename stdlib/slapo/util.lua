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
