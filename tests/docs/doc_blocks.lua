-- Runs every ```lua block of README.md and docs/*.md, as Rust's doc tests run a crate's examples.
--   slapo-lua run tests/docs/doc_blocks.lua ROOT [FILTER]      (tests/cli/test_doc_blocks.sh)
-- A block is a whole program, unless the line above its fence says otherwise (and then the visible
-- text above that says it too: the file it continues, `--nproc N`):
--   <!-- doctest: continues=tests/docs/gpt2.lua -->  runs after that file (the model, schedule and
--                                                    inputs the text before the block made)
--   <!-- doctest: nproc=2 -->                        on 2 ranks (with continues=... too); nproc=1,2
--                                                    runs it on 1 rank, then on 2
--   <!-- doctest: spec -->                           a spec file, run by `slapo-lua test`
-- Each runs in a fresh directory (what it writes stays out of the checkout), within 180 s.
-- Prints one line a block and exits non-zero when one fails. FILTER: only blocks whose
-- "file:line" contains it.
local root, filter = assert(arg[1], "usage: doc_blocks.lua ROOT [FILTER]"), arg[2]

local util = require("slapo.util")
local write = util.write_file

local function read(path)
  return assert(util.read_file(path), "doc_blocks: cannot read " .. path)
end

-- {file, line, code, nproc, continues, spec} for each ```lua block of one markdown file
local function blocks_of(file)
  local lines, out = {}, {}
  for line in (read(root .. "/" .. file) .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  local i = 1
  while i <= #lines do
    if lines[i]:match("^%s*```lua%s*$") then
      local block = { file = file, line = i, nproc = { 1 } }
      local marker = i > 1 and lines[i - 1]:match("^<!%-%- doctest: (.-) %-%->$")
      if marker then
        for word in marker:gmatch("%S+") do
          local key, value = word:match("^(%w+)=(%S+)$")
          if key == "nproc" then
            block.nproc = {}
            for n in value:gmatch("[^,]+") do block.nproc[#block.nproc + 1] = assert(tonumber(n), "nproc=N[,M]") end
          elseif key == "continues" then block.continues = value
          elseif word == "spec" then block.spec = true
          else error(("%s:%d: unknown doctest marker '%s' (continues=FILE, nproc=N, spec)"):format(file, i - 1, word)) end
        end
      end
      -- a reader never sees the marker: the text above it must say what the block continues and
      -- how many ranks it runs on, as the marker does
      local min_nproc = math.min(unpack(block.nproc))
      if block.continues or min_nproc > 1 then
        local above = i - 2
        while above > 0 and lines[above]:match("^%s*$") do above = above - 1 end
        local visible = above > 0 and lines[above] or ""
        if block.continues and not visible:find(block.continues, 1, true) then
          error(("%s:%d: the text above the block must name %s, which it continues"):format(file, i, block.continues))
        end
        if min_nproc > 1 and not visible:find(("--nproc %d"):format(min_nproc), 1, true) then
          error(("%s:%d: the text above the block must say it runs with --nproc %d"):format(file, i, min_nproc))
        end
      end
      local code = {}
      i = i + 1
      while i <= #lines and not lines[i]:match("^%s*```%s*$") do
        code[#code + 1] = lines[i]
        i = i + 1
      end
      block.code = table.concat(code, "\n") .. "\n"
      out[#out + 1] = block
    end
    i = i + 1
  end
  return out
end

local files = { "README.md" }
local listing = assert(io.popen(("ls '%s/docs'"):format(root)))
for name in listing:lines() do
  if name:match("%.md$") then files[#files + 1] = "docs/" .. name end
end
listing:close()
table.sort(files, function(a, b) return a == "README.md" or (b ~= "README.md" and a < b) end)

local work = os.tmpname()
os.remove(work)
assert(os.execute(("mkdir -p '%s'"):format(work)))
local passed, failed, skipped, count = 0, 0, 0, 0

-- Runs one block on `nproc` ranks in a directory of its own and prints its line.
local function run_block(block, nproc, where)
  count = count + 1
  local dir = ("%s/%d"):format(work, count)
  assert(os.execute(("mkdir -p '%s'"):format(dir)))
  local prelude = block.continues and read(root .. "/" .. block.continues) or ""
  local script = dir .. "/block.lua"
  write(script, ("-- %s\n%s\n%s"):format(where, prelude, block.code))
  local argv = { slapo._executable(), block.spec and "test" or "run" }
  if nproc > 1 then
    argv[#argv + 1] = "--nproc"
    argv[#argv + 1] = tostring(nproc)
  end
  argv[#argv + 1] = script
  local log = dir .. "/log"
  local started = slapo.clock()
  local r = slapo.run_process({ "/bin/sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", dir, unpack(argv) },
    { timeout = 180, log = log, env = { SLAPO_DIST_TIMEOUT = "60" } })
  local took = slapo.clock() - started
  local how = nproc > 1 and (" on %d ranks"):format(nproc) or ""
  local text = read(log)
  local why = block.spec and text:match("\n0 passed, 0 failed, %d+ skipped") and text:match("skip  [^\n]-: ([^\n]*)")
  if why then  -- a spec whose every case cannot run here (slapo-lua test fails such a file)
    skipped = skipped + 1
    print(("skip %s%s: %s"):format(where, how, why))
  elseif r.status == "exited" and r.code == 0 then
    passed = passed + 1
    print(("ok   %s%s (%.1f s)"):format(where, how, took))
  else
    failed = failed + 1
    print(("FAIL %s%s: %s %s"):format(where, how, r.status, tostring(r.code or r.signal or "")))
    print((text:sub(-1500):gsub("\n", "\n     ")))
  end
end

for _, file in ipairs(files) do
  for _, block in ipairs(blocks_of(file)) do
    local where = ("%s:%d"):format(block.file, block.line)
    if not filter or where:find(filter, 1, true) then
      for _, nproc in ipairs(block.nproc) do run_block(block, nproc, where) end
    end
  end
end
os.execute(("rm -rf '%s'"):format(work))
print(("%d passed, %d failed, %d skipped (%d runs)"):format(passed, failed, skipped, count))
if failed > 0 or count == 0 then os.exit(1) end
