--- The REPL's Lua half: evaluating input (multi-line chunks, expressions printed without `=`)
--- and tab completion of globals, fields, methods and module paths inside sch["...
---
--- Example session:
---   slapo> model = slapo.models.gpt2("gpt2", {device = "meta"})
---   slapo> sch = slapo.create_schedule(model)
---   slapo> sch["transformer.h.0.a<TAB>     -> sch["transformer.h.0.attn
---   slapo> sch["transformer.h.0.attn"].mod:type()
---   GPT2Attention
local M = {}

local function show(value)
  if type(value) == "table" and getmetatable(value) == nil then
    local parts, n = {}, 0
    for k, v in pairs(value) do
      n = n + 1
      if n > 20 then
        table.insert(parts, "...")
        break
      end
      local key = type(k) == "string" and k or ("[" .. tostring(k) .. "]")
      table.insert(parts, key .. " = " .. (type(v) == "string" and string.format("%q", v) or tostring(v)))
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(value)
end

-- A line's leading `local` dropped: each line runs as a chunk of its own, where a local would end
-- with the line; at the prompt its names stay for the lines after, as they would in a script, so a
-- snippet pastes as written. Locals inside blocks (for, function, do) are left alone.
local function keep_top_level_locals(source)
  local kept = source:gsub("^(%s*)local%s+function(%s)", "%1function%2", 1)
  if kept ~= source then return kept end
  return (source:gsub("^(%s*)local%s+([%a_][%w_]*%s*[,=])", "%1%2", 1))
end

--- Evaluates `source` in the global environment. Returns "incomplete" (the chunk needs more
--- lines), or "ok"/"error" with the text to print.
function M.eval(source)
  source = keep_top_level_locals(source)
  local chunk, expression_err = load("return " .. source, "=stdin")
  if not chunk then
    local err
    chunk, err = load(source, "=stdin")
    if not chunk then
      -- more lines may finish it: a statement ("for i = 1, 3 do") or an expression ("1 +")
      if err:match("<eof>'?$") or expression_err:match("<eof>'?$") then
        return "incomplete"
      end
      return "error", err
    end
  end
  local results = { xpcall(chunk, slapo._traceback) }
  if not results[1] then
    -- the frames below the typed chunk are the REPL's own
    local text = tostring(results[2]):gsub("\n[^\n]*in function 'xpcall'.*$", "")
    -- nor is the typed line itself (stdin:1, the main chunk): a header left with no frame goes too
    text = text:gsub("\n\tstdin:%d+: in main chunk$", ""):gsub("\nstack traceback:$", "")
    return "error", text
  end
  local lines = {}
  for i = 2, table.maxn(results) do
    table.insert(lines, show(results[i]))
  end
  return "ok", table.concat(lines, "\t")
end

-- Walks a dotted/colon chain of names from the globals without calling anything.
local function resolve(chain)
  local value = _G
  for name in chain:gmatch("[^%.:]+") do
    local ok, next_value = pcall(function() return value[name] end)
    if not ok or next_value == nil then
      return nil
    end
    value = next_value
  end
  return value
end

local function keys_of(value, methods_only)
  local out = {}
  local function add(k, v)
    if type(k) == "string" and (not methods_only or type(v) == "function") and not k:match("^_") then
      out[k] = true
    end
  end
  if type(value) == "table" then
    for k, v in pairs(value) do
      add(k, v)
    end
  end
  local mt = getmetatable(value)
  if type(mt) == "table" then
    for k, v in pairs(mt.methods or {}) do
      add(k, v)
    end
    if type(mt.__index) == "table" then
      for k, v in pairs(mt.__index) do
        add(k, v)
      end
    end
  end
  if not methods_only and mt and mt.__name == "slapo.Schedule" then
    for _, field in ipairs({ "path", "name", "mod", "parent", "rank", "world_size" }) do
      out[field] = true
    end
  end
  local list = {}
  for k in pairs(out) do
    table.insert(list, k)
  end
  table.sort(list)
  return list
end

-- Module paths below a schedule that continue `partial` by one level.
local function path_candidates(sch, partial)
  local seen, out = {}, {}
  for path in sch:named_schedules() do
    if path:sub(1, #partial) == partial then
      local rest = path:sub(#partial + 1)
      local next_part = rest:match("^[^%.]*")
      local candidate = partial .. next_part
      if not seen[candidate] then
        seen[candidate] = true
        table.insert(out, candidate)
      end
    end
  end
  return out
end

--- Completions of `word` (the text before the cursor since the last break character) given
--- the whole line before the cursor.
function M.complete(line, word)
  -- inside sch["...: module paths
  local chain, partial = line:match("([%a_][%w_%.]*)%[[\"']([^\"']*)$")
  if chain and partial == word then
    local target = resolve(chain)
    local mt = getmetatable(target)
    if mt and mt.__name == "slapo.Schedule" then
      return path_candidates(target, partial)
    end
    return {}
  end
  local base, sep, prefix = word:match("^(.*)([%.:])([%w_]*)$")
  local names
  if base then
    local target = resolve(base)
    if target == nil then
      return {}
    end
    names = keys_of(target, sep == ":")
  else
    prefix = word
    names = keys_of(_G)
  end
  local out = {}
  for _, name in ipairs(names) do
    if name:sub(1, #prefix) == prefix then
      table.insert(out, (base and (base .. sep) or "") .. name)
    end
  end
  return out
end

return M
