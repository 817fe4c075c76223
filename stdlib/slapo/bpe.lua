--- GPT-2's byte-level BPE tokenizer (encoder.json + vocab.bpe, as published with GPT-2), in Lua.
---
--- Example usage:
---   local bpe = require("slapo.bpe").load("data/gpt2-bpe")
---   local ids = bpe:encode("Hello, world!")     -- {15496, 11, 995, 0}
---   print(bpe:decode(ids))                      -- Hello, world!
---
--- Pre-tokenisation follows GPT-2's pattern ('s 't 're 've 'm 'll 'd, then runs of letters, of
--- digits, of other symbols, each with at most one leading space, and whitespace runs). Letters
--- are ASCII letters and any non-ASCII UTF-8 sequence: exact for English text; other scripts split
--- a little differently from the Python regex, but decode(encode(s)) == s holds for any bytes.
local M = {}
M.__index = M

-- GPT-2's reversible byte -> printable character map, as UTF-8 strings.
local function utf8_char(code)
  if code < 0x80 then
    return string.char(code)
  end
  return string.char(0xC0 + math.floor(code / 64), 0x80 + code % 64)
end

local function byte_maps()
  local to_char, to_byte = {}, {}
  local printable = {}
  for b = 33, 126 do printable[b] = true end
  for b = 161, 172 do printable[b] = true end
  for b = 174, 255 do printable[b] = true end
  local extra = 0
  for b = 0, 255 do
    local code = b
    if not printable[b] then
      code = 256 + extra
      extra = extra + 1
    end
    to_char[b] = utf8_char(code)
    to_byte[to_char[b]] = b
  end
  return to_char, to_byte
end

function M.load(dir)
  if type(dir) ~= "string" then
    error(("bpe.load: the directory (holding encoder.json and vocab.bpe) must be a string, got %s"):format(type(dir)), 2)
  end
  for _, file in ipairs({ "encoder.json", "vocab.bpe" }) do
    local f = io.open(dir .. "/" .. file, "r")
    if not f then
      error(("bpe.load: '%s' has no %s (a GPT-2 tokenizer directory holds encoder.json and vocab.bpe)"):format(dir,
        file), 2)
    end
    f:close()
  end
  local self = setmetatable({}, M)
  self.encoder = slapo.read_json(dir .. "/encoder.json")
  self.decoder = {}
  for token, id in pairs(self.encoder) do
    self.decoder[id] = token
  end
  self.ranks = {}
  local rank = 0
  for line in io.lines(dir .. "/vocab.bpe") do
    local a, b = line:match("^(%S+) (%S+)$")
    if a and not line:match("^#") then
      self.ranks[a .. " " .. b] = rank
      rank = rank + 1
    end
  end
  self.byte_to_char, self.char_to_byte = byte_maps()
  self.cache = {}
  return self
end

-- Splits text into GPT-2's pre-tokens.
local contractions = { "'s", "'t", "'re", "'ve", "'m", "'ll", "'d" }

local function class_of(c)
  if c:match("%a") or c:byte() >= 128 then return "L" end
  if c:match("%d") then return "N" end
  if c:match("%s") then return "S" end
  return "O"
end

local function pretokenize(text)
  local out, i, n = {}, 1, #text
  while i <= n do
    local matched = false
    for _, c in ipairs(contractions) do
      if text:sub(i, i + #c - 1) == c then
        table.insert(out, c)
        i = i + #c
        matched = true
        break
      end
    end
    if not matched then
      local start = i
      local c = text:sub(i, i)
      local lead_space = c == " " and i < n and class_of(text:sub(i + 1, i + 1)) ~= "S"
      if lead_space then
        i = i + 1
        c = text:sub(i, i)
      end
      local cls = class_of(c)
      if cls == "S" then
        -- whitespace run; if followed by a non-space, leave its last char for the next token
        local j = i
        while j <= n and class_of(text:sub(j, j)) == "S" do j = j + 1 end
        if j <= n and j - i > 1 then j = j - 1 end
        table.insert(out, text:sub(start, j - 1))
        i = j
      else
        local j = i
        while j <= n and class_of(text:sub(j, j)) == cls do j = j + 1 end
        table.insert(out, text:sub(start, j - 1))
        i = j
      end
    end
  end
  return out
end
M.pretokenize = pretokenize

-- Applies the merges to one pre-token (already mapped to printable characters).
function M:bpe(token)
  local cached = self.cache[token]
  if cached then return cached end
  local parts = {}
  for ch in token:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
    table.insert(parts, ch)
  end
  while #parts > 1 do
    local best, best_rank = nil, math.huge
    for k = 1, #parts - 1 do
      local r = self.ranks[parts[k] .. " " .. parts[k + 1]]
      if r and r < best_rank then best, best_rank = k, r end
    end
    if not best then break end
    local first, second = parts[best], parts[best + 1]
    local merged = {}
    local k = 1
    while k <= #parts do
      if k < #parts and parts[k] == first and parts[k + 1] == second then
        table.insert(merged, first .. second)
        k = k + 2
      else
        table.insert(merged, parts[k])
        k = k + 1
      end
    end
    parts = merged
  end
  self.cache[token] = parts
  return parts
end

function M:encode(text)
  local ids = {}
  for _, piece in ipairs(pretokenize(text)) do
    local mapped = piece:gsub(".", function(c) return self.byte_to_char[c:byte()] end)
    for _, token in ipairs(self:bpe(mapped)) do
      local id = self.encoder[token]
      if not id then error(("bpe: token %q is not in the vocabulary"):format(token)) end
      table.insert(ids, id)
    end
  end
  return ids
end

function M:decode(ids)
  local out = {}
  for _, id in ipairs(ids) do
    local token = self.decoder[id]
    if not token then error(("bpe: id %s is not in the vocabulary"):format(tostring(id))) end
    for ch in token:gmatch("[%z\1-\127\194-\244][\128-\191]*") do
      table.insert(out, string.char(self.char_to_byte[ch]))
    end
  end
  return table.concat(out)
end

return M
