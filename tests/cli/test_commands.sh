#!/usr/bin/env bash
# The command line: --help, --version, exit codes, error reports with tracebacks, script args.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

version=$("$bin" --version)
grep -q '^slapo-lua [0-9]' <<<"$version"
grep -q '^LuaJIT .*JIT compiler o[nf]' <<<"$version" || { echo "--version should name the LuaJIT: $version"; exit 1; }
"$bin" --help | grep -q 'run'

# a bad command line exits 2
set +e
"$bin" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] || { echo "unknown subcommand should exit 2"; exit 1; }
"$bin" run >/dev/null 2>&1; [ $? -eq 2 ] || { echo "run without a script should exit 2"; exit 1; }
# the heap: glibc's own settings by default, "keep" on request; anything else refused by name
out=$(SLAPO_MALLOC=jemalloc "$bin" --version 2>&1); [ $? -eq 2 ] || { echo "SLAPO_MALLOC=jemalloc should exit 2"; exit 1; }
grep -qF "SLAPO_MALLOC='jemalloc' is not a heap setting (choices: glibc, the default; keep)" <<<"$out" ||
  { echo "got: $out"; exit 1; }
for heap in glibc keep; do
  SLAPO_MALLOC=$heap "$bin" run <(echo 'print(slapo.tensor({1, 2}):sum():item())') | grep -qx 3 ||
    { echo "SLAPO_MALLOC=$heap does not run"; exit 1; }
done
"$bin" run "$tmp/missing.lua" >/dev/null 2>&1; [ $? -eq 2 ] || { echo "missing script should exit 2"; exit 1; }
set -e
out=$("$bin" frobnicate 2>&1 || true)
echo "$out" | grep -q "unknown command 'frobnicate' (commands: run, test, " ||
  { echo "an unknown command should be named with the commands: $out"; exit 1; }
"$bin" help | grep -q '^  tune ' || { echo "help should list the commands"; exit 1; }
"$bin" help plan | grep -q -- '--cluster' || { echo "help plan should describe plan"; exit 1; }
set +e
"$bin" </dev/null 2>"$tmp/usage"; [ $? -eq 2 ] || { echo "a bare slapo-lua off a terminal should exit 2"; exit 1; }
set -e
grep -q 'Subcommands:' "$tmp/usage" || { echo "a bare slapo-lua should print the usage"; exit 1; }

# a Lua error prints the message and a traceback, and exits 1
cat > "$tmp/fails.lua" <<'LUA'
local function inner() error("deliberate failure") end
inner()
LUA
set +e
"$bin" run "$tmp/fails.lua" 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 1 ] || { echo "a Lua error should exit 1, got $rc"; exit 1; }
grep -q 'fails.lua:1: deliberate failure' "$tmp/err"
grep -q 'stack traceback' "$tmp/err"
grep -q "in function 'inner'" "$tmp/err"

# a LibTorch error reaches the script with its real message
cat > "$tmp/torch_error.lua" <<'LUA'
slapo.ones({2, 3}):matmul(slapo.ones({2, 3}))
LUA
set +e
"$bin" run "$tmp/torch_error.lua" 2>"$tmp/err"
set -e
grep -q 'cannot be multiplied' "$tmp/err"
if grep -q 'C++ exception' "$tmp/err"; then echo "lost the exception message"; exit 1; fi

# arguments after the script belong to the script, options included
cat > "$tmp/args.lua" <<'LUA'
print(#arg, arg[1], arg[2], arg[3], select("#", ...))
LUA
out=$("$bin" run "$tmp/args.lua" --tp 2 x)
[ "$out" = "3	--tp	2	x	3" ] || { echo "script args: got '$out'"; exit 1; }

# inspect prints HF names and the HF parameter count
out=$("$bin" inspect gpt2)
echo "$out" | grep -q '(transformer.h.0.attn.c_attn) Conv1D'
echo "$out" | tail -1 | grep -q '^124,439,808 parameters$'
"$bin" inspect bert-base-uncased | tail -1 | grep -q '^109,514,298 parameters$'
set +e
"$bin" inspect gtp2 2>"$tmp/err"; rc=$?
set -e
expect_code 1 "$rc"
grep -q "unknown preset 'gtp2', did you mean 'gpt2'" "$tmp/err"
# a traceback once, without frames that are only a C address (SLAPO_FULL_TRACEBACK=1 keeps them)
printf 'local m = slapo.nn.Module{ type = "X", forward = function() error("in forward") end }\nslapo.no_grad(function() m(slapo.ones({ 1 })) end)\n' >"$tmp/trace.lua"
set +e
"$bin" run "$tmp/trace.lua" 2>"$tmp/err"
set -e
[ "$(grep -c 'stack traceback:' "$tmp/err")" -eq 1 ] || { echo "one traceback expected:"; cat "$tmp/err"; exit 1; }
if grep -q '\[C\]: at 0x' "$tmp/err"; then echo "a C address in the traceback:"; cat "$tmp/err"; exit 1; fi
grep -q "in forward" "$tmp/err" || { cat "$tmp/err"; exit 1; }
# commands that name a missing file say so, with no Lua traceback (the mistake is the path)
for cmd in "inspect $tmp/nowhere" "plot $tmp/nowhere.jsonl" "tune --show $tmp/nowhere.jsonl"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" $cmd 2>"$tmp/err"; rc=$?
  set -e
  expect_code 1 "$rc"
  grep -q "$tmp/nowhere" "$tmp/err" || { echo "$cmd: the message should name the path:"; cat "$tmp/err"; exit 1; }
  if grep -q "stack traceback" "$tmp/err"; then echo "$cmd: a traceback for a missing file:"; cat "$tmp/err"; exit 1; fi
done
# the memory meter frees blocks the allocator saw before it listened: no library warning about them
cat > "$tmp/meter.lua" <<'LUA'
local keep = {}
for i = 1, 3000 do keep[i] = slapo.zeros({ 64 }) end
local held = slapo.held_tensor_mib(function()
  for i = 1, 3000 do keep[i] = nil end
  collectgarbage()
  collectgarbage()
end)
assert(held <= 0, "freeing should hold nothing, held " .. held)
LUA
"$bin" run "$tmp/meter.lua" 2>"$tmp/err"
if grep -q "Memory block of unknown size" "$tmp/err"; then echo "the meter let the allocator's warning out:"; cat "$tmp/err"; exit 1; fi
echo "cli ok"
