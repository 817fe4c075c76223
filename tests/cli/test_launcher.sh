#!/usr/bin/env bash
# run --nproc: rank-prefixed output, one failure report, the other ranks stopped within seconds.
set -euo pipefail
bin="$1"
source "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat > "$tmp/ok.lua" <<'LUA'
local t = slapo.ones({1}) * slapo.dist.rank()
slapo.dist.all_reduce(t)
print("sum", t:item(), "args", arg[1])
LUA
out=$("$bin" run --nproc 3 "$tmp/ok.lua" --flag 2>&1)
echo "$out" | grep -qx "sum	3	args	--flag"
echo "$out" | grep -qx "\[rank 2\] sum	3	args	--flag"

# rank 1 fails while rank 0 waits in a collective: rank 0 is stopped, the failure shows once
cat > "$tmp/fail.lua" <<'LUA'
if slapo.dist.rank() == 1 then
  local function step() error("rank one broke") end
  step()
end
slapo.dist.barrier()
while true do end
LUA
start=$(date +%s)
set +e
"$bin" run --nproc 2 "$tmp/fail.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] || { echo "a failing rank must fail the run"; exit 1; }
[ "$elapsed" -lt 15 ] || { echo "stopping the ranks took ${elapsed}s"; exit 1; }
[ "$(grep -c 'rank one broke' "$tmp/err")" -eq 1 ] || { echo "failure not shown exactly once:"; cat "$tmp/err"; exit 1; }
grep -q "rank 1 of 2 failed: .*fail.lua:2: rank one broke" "$tmp/err"
grep -q "in function 'step'" "$tmp/err"

# the rank that caused the failure is the one named, not the peer that noticed it
cat > "$tmp/exits.lua" <<'LUA'
if slapo.dist.rank() == 1 then os.exit(3) end
slapo.dist.barrier()
LUA
set +e
"$bin" run --nproc 2 "$tmp/exits.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
set -e
[ $rc -ne 0 ] || { echo "a rank exiting 3 must fail the run"; exit 1; }
grep -q "rank 1 of 2 failed: exited with code 3" "$tmp/err" || { echo "blamed the wrong rank:"; cat "$tmp/err"; exit 1; }

# a rank killed inside a gradient all-reduce on 4 ranks is the cause; the peers that noticed the
# closed links first are named as the ones that failed after it
cat > "$tmp/killed.lua" <<'LUA'
local ffi = require("ffi")
ffi.cdef("int getpid(void); int kill(int pid, int sig);")
local t = slapo.ones({ 65536 })
for step = 1, 1000 do
  if step == 3 and slapo.dist.rank() == 2 then ffi.C.kill(ffi.C.getpid(), 9) end
  slapo.dist.all_reduce(t)
end
LUA
set +e
timeout 120 "$bin" run --nproc 4 "$tmp/killed.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
set -e
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then echo "a killed rank must fail the run, not hang (rc $rc)"; exit 1; fi
grep -q "rank 2 of 4 failed: died from signal 9" "$tmp/err" || { echo "blamed the wrong rank:"; cat "$tmp/err"; exit 1; }

# a rank that never reaches a collective is named, not the rank that timed out waiting for it, nor
# (on 4 ranks) the ranks that lost their links to that one
absent_rank_is_named() {  # NPROC ABSENT_RANK
  cat > "$tmp/absent.lua" <<LUA
if slapo.dist.rank() == $2 then while true do end end
slapo.dist.barrier()
LUA
  set +e
  SLAPO_DIST_TIMEOUT=3 timeout 60 "$bin" run --nproc "$1" "$tmp/absent.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
  set -e
  if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then echo "an absent rank of $1 must fail the run, not hang (rc $rc)"; exit 1; fi
  grep -q "rank $2 of $1 never reached the collective that rank [0-9]* timed out in" "$tmp/err" ||
    { echo "blamed the wrong rank of $1 for a timeout:"; cat "$tmp/err"; exit 1; }
}
absent_rank_is_named 2 1
absent_rank_is_named 4 2

# a rank that keeps running after every other one finished is stopped after SLAPO_DIST_TIMEOUT
cat > "$tmp/outlives.lua" <<'LUA'
slapo.dist.barrier()
if slapo.dist.rank() == 1 then while true do end end
LUA
start=$(date +%s)
set +e
SLAPO_DIST_TIMEOUT=3 timeout 60 "$bin" run --nproc 2 "$tmp/outlives.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "a rank outliving the others must be stopped (rc $rc)"; exit 1; }
[ "$elapsed" -lt 20 ] || { echo "stopping the outliving rank took ${elapsed}s"; exit 1; }
grep -q "rank 1 of 2 was still running 3 s after every other rank had finished" "$tmp/err" ||
  { echo "no report of the outliving rank:"; cat "$tmp/err"; exit 1; }

# torchrun's contract: a process with RANK/WORLD_SIZE joins instead of spawning
cat > "$tmp/who.lua" <<'LUA'
print(slapo.dist.rank(), slapo.dist.world_size())
LUA
port=$((20000 + RANDOM % 20000))
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bin" run "$tmp/who.lua" >"$tmp/r1" &
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bin" run "$tmp/who.lua" >"$tmp/r0"
wait
[ "$(cat "$tmp/r0")" = "0	2" ]
[ "$(cat "$tmp/r1")" = "1	2" ]

# a peer that never comes: the rendezvous gives up after SLAPO_DIST_TIMEOUT
set +e
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 1)) SLAPO_DIST_TIMEOUT=2 \
  timeout 30 "$bin" run "$tmp/who.lua" 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 1 ] || { echo "a missing peer should fail with 1, got $rc"; cat "$tmp/err"; exit 1; }

# Several nodes on loopback (tests/cli/test_multinode.sh runs them on two network namespaces):
# the launchers meet, and each mistake is named. expect_refusal CODE TEXT COMMAND...: the
# command exits with CODE and says TEXT.
expect_refusal() {
  local want=$1 text=$2
  shift 2
  set +e
  timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  set -e
  expect_code "$want" "$got" "$* said: $(cat "$tmp/err")"
  grep -qF "$text" "$tmp/err" || { echo "$* did not say '$text':"; cat "$tmp/err"; exit 1; }
}
nodes=(--nnodes 2 --master-addr 127.0.0.1 --master-port $((port + 2)) --nproc 1)
"$bin" run "${nodes[@]}" --node-rank 1 "$tmp/who.lua" >"$tmp/n1" &
"$bin" run "${nodes[@]}" --node-rank 0 "$tmp/who.lua" >"$tmp/n0"
wait
[ "$(cat "$tmp/n0")" = "0	2" ] || { echo "node 0's rank: $(cat "$tmp/n0")"; exit 1; }
[ "$(cat "$tmp/n1")" = "[rank 1] 1	2" ] || { echo "node 1's rank: $(cat "$tmp/n1")"; exit 1; }
expect_refusal 2 "run: --nnodes 2 needs --master-addr" "$bin" run --nnodes 2 "$tmp/who.lua"
# torchrun's spelling of an option: the hint names ours
expect_refusal 2 "run: unknown option '--node_rank' (did you mean '--node-rank'?); slapo-lua help run lists its options" \
  "$bin" run --nnodes 2 --node_rank 1 "$tmp/who.lua"
expect_refusal 2 "plan: unknown option '--max_stages' (did you mean '--max-stages'?)" "$bin" plan gpt2 --max_stages 2
expect_refusal 2 "run: --node-rank 2 is outside --nnodes 2 (valid: 0 .. 1)" \
  "$bin" run --nnodes 2 --node-rank 2 --master-addr 127.0.0.1 "$tmp/who.lua"
expect_refusal 1 "node 1 of 2 did not join at 127.0.0.1:$((port + 3)) within 2 s (--rdzv-timeout)" \
  "$bin" run --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port $((port + 3)) --rdzv-timeout 2 "$tmp/who.lua"
expect_refusal 1 "cannot listen on 192.0.2.1:$((port + 4)): Cannot assign requested address" \
  "$bin" run --nnodes 2 --node-rank 0 --master-addr 192.0.2.1 --master-port $((port + 4)) "$tmp/who.lua"
# nodes 0 and 1 of 3 wait for node 2; a second node 0, a second node 1 and a node 2 with another
# --nproc are refused by name
three=(--nnodes 3 --master-addr 127.0.0.1 --master-port $((port + 5)))
"$bin" run "${three[@]}" --node-rank 0 --rdzv-timeout 30 "$tmp/who.lua" >/dev/null 2>&1 &
waiting=($!)
"$bin" run "${three[@]}" --node-rank 1 --rdzv-timeout 30 "$tmp/who.lua" >/dev/null 2>&1 &
waiting+=($!)
sleep 1
expect_refusal 1 "run: node 0 serves the rendezvous store on --master-addr: cannot listen on 127.0.0.1" \
  "$bin" run "${three[@]}" --node-rank 0 "$tmp/who.lua"
grep -qF "port $((port + 5)) is in use on this machine (a launcher already serving it, or another program): choose another --master-port" \
  "$tmp/err" || { echo "a port in use was not named as such:"; cat "$tmp/err"; exit 1; }
expect_refusal 1 "run: --node-rank 1 is already taken by the launcher on $(hostname)" \
  "$bin" run "${three[@]}" --node-rank 1 "$tmp/who.lua"
expect_refusal 1 "runs --nnodes 3 --nproc 1 --max-restarts 0, this node --nnodes 3 --nproc 2 --max-restarts 0; every node needs the same values" \
  "$bin" run "${three[@]}" --node-rank 2 --nproc 2 "$tmp/who.lua"
kill "${waiting[@]}" 2>/dev/null || true
wait "${waiting[@]}" 2>/dev/null || true
# --max-restarts on one machine: a rank that fails once is started again with every other rank,
# TORCHELASTIC_RESTART_COUNT counting the attempts; a run that keeps failing stops after the last
cat > "$tmp/flaky.lua" <<'LUA'
slapo.dist.barrier()
local attempt = tonumber(os.getenv("TORCHELASTIC_RESTART_COUNT"))
if slapo.dist.rank() == 1 and attempt < tonumber(arg[1]) then error("flaky on attempt " .. attempt) end
print("attempt " .. attempt .. " of " .. os.getenv("TORCHELASTIC_MAX_RESTARTS") .. " restarts")
LUA
"$bin" run --nproc 2 --max-restarts 2 "$tmp/flaky.lua" 1 >"$tmp/out" 2>"$tmp/err"
grep -q "^attempt 1 of 2 restarts$" "$tmp/out" || { echo "no second attempt:"; cat "$tmp/out" "$tmp/err"; exit 1; }
grep -q "restarting every rank (restart 1 of 2, --max-restarts)" "$tmp/err" || { cat "$tmp/err"; exit 1; }
expect_refusal 1 "rank 1 of 2 failed: $tmp/flaky.lua:3: flaky on attempt 1" \
  "$bin" run --nproc 2 --max-restarts 1 "$tmp/flaky.lua" 5
grep -c "restarting every rank" "$tmp/err" | grep -qx 1 || { echo "one restart, then the end:"; cat "$tmp/err"; exit 1; }
# one process with restarts runs under the launcher too
"$bin" run --max-restarts 1 "$tmp/flaky.lua" 0 >"$tmp/out" 2>&1
grep -q "^attempt 0 of 1 restarts$" "$tmp/out" || { cat "$tmp/out"; exit 1; }
echo "launcher ok"
