-- One tokenizer encoding a text line by line, three passes, for bench/tokenizer_speed and
-- bench/tokenizer_json_speed: prints the first pass's seconds and the best of the other two, and
-- writes the ids as JSON to OUT when given.
--   slapo-lua run bench/tokenizer_encode.lua cpp|lua TOKENIZER TEXT [OUT]
local kind, dir, path, out = arg[1], arg[2], arg[3], arg[4]
local text = assert(require("slapo.util").read_file(path), "cannot read " .. path)
local tok = kind == "cpp" and slapo.tokenizer(dir) or require("slapo.bpe").load(dir)
local lines = {}
for line in text:gmatch("[^\n]*\n?") do
  if line ~= "" then lines[#lines + 1] = line end
end
local times, ids = {}, nil
for pass = 1, 3 do
  local t0 = slapo.clock()
  ids = {}
  for _, line in ipairs(lines) do
    for _, id in ipairs(tok:encode(line)) do ids[#ids + 1] = id end
  end
  times[pass] = slapo.clock() - t0
end
if out then
  local o = assert(io.open(out, "w"))
  o:write(slapo.json_encode(ids))
  o:close()
end
-- decode: the ids back to the text, line by line as encoded, best of three
local decode_s = math.huge
if tok.decode then
  local per_line = {}
  for i, line in ipairs(lines) do
    per_line[i] = tok:encode(line)
  end
  for _ = 1, 3 do
    local t0 = slapo.clock()
    for i = 1, #per_line do tok:decode(per_line[i]) end
    decode_s = math.min(decode_s, slapo.clock() - t0)
  end
end
print(times[1], math.min(times[2], times[3]), decode_s)
