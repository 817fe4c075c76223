--- The spec runner behind `slapo-lua test`: describe/it blocks with eq, pcall_err and matches,
--- in the style of busted and Neovim's functional tests.
---
--- Example spec (tests/lua/tensor_spec.lua):
---   describe("tensor", function()
---     it("adds", function() eq(3, (slapo.ones{1} * 3):item()) end)
---     it("runs on a GPU", function()
---       if not slapo.cuda.is_available() then skip("no GPU") end
---       ...
---     end)
---   end)
--- Output: one line per case ("ok   tensor adds", "skip tensor runs on a GPU: no GPU", or "FAIL ..."
--- with the error), and the host prints "N passed, N failed, N skipped" after all files.
--- A case passes only when it checked something: eq, matches, close, pcall_err or assert.
local M = {}

local function describe_value(v, depth)
  if type(v) == "string" then
    return string.format("%q", v)
  end
  if type(v) == "table" and getmetatable(v) == nil and (depth or 0) < 3 then
    local parts = {}
    for k, item in pairs(v) do
      local key = type(k) == "number" and "" or (tostring(k) .. " = ")
      table.insert(parts, key .. describe_value(item, (depth or 0) + 1))
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

local function deep_equal(a, b)
  if type(a) ~= type(b) then
    return false
  end
  if type(a) ~= "table" then
    return a == b
  end
  for k, v in pairs(a) do
    if not deep_equal(v, b[k]) then
      return false
    end
  end
  for k in pairs(b) do
    if a[k] == nil then
      return false
    end
  end
  return true
end

--- Raises unless expected equals actual (tables compared by content).
function M.eq(expected, actual, message)
  if not deep_equal(expected, actual) then
    error(("%sexpected %s, got %s"):format(message and (message .. ": ") or "", describe_value(expected),
      describe_value(actual)), 2)
  end
end

--- Raises unless `s` matches the Lua pattern.
function M.matches(pattern, s)
  if type(s) ~= "string" or not s:find(pattern) then
    error(("expected a string matching %q, got %s"):format(pattern, describe_value(s)), 2)
  end
end

--- Calls fn(...) expecting an error; returns its message without the "file:line: " prefix.
function M.pcall_err(fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then
    error("expected an error, but the call succeeded", 2)
  end
  err = tostring(err)
  return (err:gsub("^[^\n]-:%d+: ", ""))
end

--- Raises unless the two tensors are close (relative and absolute tolerance).
function M.close(expected, actual, opts)
  opts = opts or {}
  if not slapo.allclose(expected, actual, { rtol = opts.rtol or 1e-5, atol = opts.atol or 1e-6 }) then
    local diff = (expected:double() - actual:double()):abs():max():item()
    error(("tensors differ: max abs difference %g"):format(diff), 2)
  end
end

-- What `skip(reason)` raises: not an error, the case's result.
local Skip = {}

--- Ends the running case as skipped, with the reason printed beside it ("no GPU").
function M.skip(reason)
  if type(reason) ~= "string" or reason == "" then
    error("skip: give the reason the case cannot run here, as a string", 2)
  end
  error(setmetatable({ reason = reason }, Skip), 0)
end

--- The device a device spec runs on: SLAPO_TEST_DEVICE (default "cpu"; scripts/device-check sets
--- "cuda"), refused where this build or machine has no CUDA.
function M.test_device()
  local device = os.getenv("SLAPO_TEST_DEVICE") or "cpu"
  if device ~= "cpu" and not slapo.cuda.is_available() then
    error(("SLAPO_TEST_DEVICE=%s, but this build or machine has no CUDA"):format(device), 2)
  end
  return device
end

-- The checks a spec calls, each counting itself, so that a case that checked nothing fails.
local function counting_checks(env, count)
  local function counted(check)
    return function(...)
      count()
      return check(...)
    end
  end
  env.eq, env.matches, env.pcall_err, env.close = counted(M.eq), counted(M.matches), counted(M.pcall_err),
    counted(M.close)
  env.assert = counted(assert)
  env.skip = M.skip
  env.test_device = M.test_device
end

local function as_traceback(err)
  if getmetatable(err) == Skip then
    return err
  end
  return debug.traceback(err, 2)
end

--- Runs one spec file in its own environment; returns passed, failed, skipped.
function M.run_file(path)
  local passed, failed, skipped = 0, 0, 0
  local names = {}
  local checks = 0
  local env = setmetatable({}, { __index = _G })
  counting_checks(env, function() checks = checks + 1 end)
  env.describe = function(name, body)
    table.insert(names, name)
    body()
    table.remove(names)
  end
  env.it = function(name, body)
    local full = table.concat(names, " ") .. " " .. name
    checks = 0
    local ok, err = xpcall(body, as_traceback)
    if ok and checks == 0 then
      ok, err = false, "the case checked nothing (call eq, matches, close, pcall_err or assert, or skip)"
    end
    if ok then
      passed = passed + 1
      if not os.getenv("SLAPO_TEST_QUIET") then
        print("ok   " .. full)
      end
    elseif getmetatable(err) == Skip then
      skipped = skipped + 1
      if not os.getenv("SLAPO_TEST_QUIET") then
        print("skip " .. full .. ": " .. err.reason)
      end
    else
      failed = failed + 1
      print("FAIL " .. full .. "\n     " .. tostring(err):gsub("\n", "\n     "))
    end
    collectgarbage()
  end
  local chunk, load_err = loadfile(path)
  if not chunk then
    print("FAIL " .. path .. ": " .. load_err)
    return 0, 1, 0
  end
  setfenv(chunk, env)
  local ok, err = xpcall(chunk, debug.traceback)
  if not ok then
    print("FAIL " .. path .. " (outside any it block): " .. tostring(err))
    failed = failed + 1
  end
  return passed, failed, skipped
end

return M
