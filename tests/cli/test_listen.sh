#!/usr/bin/env bash
# A one-machine run opens nothing to the network: while `run --nproc 2`, `test --nproc 2`, a
# tune trial on 2 ranks and `run --watch` are inside a collective, every socket their
# processes hold in LISTEN state is bound to loopback.
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tmp=$(mktemp -d)
pid=""
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$tmp"; }
trap cleanup EXIT

# LISTEN sockets of a process and its descendants, as "ADDRESS:PORT" (hex, as /proc writes them)
listening() {
  local pids inodes
  pids=$(pstree -p "$1" 2>/dev/null | grep -oE '\([0-9]+\)' | tr -d '()' || echo "$1")
  inodes=$(for p in $pids; do ls -l "/proc/$p/fd" 2>/dev/null; done | grep -oE 'socket:\[[0-9]+\]' | grep -oE '[0-9]+' | sort -u)
  for i in $inodes; do
    # fields: sl local_address rem_address st ... inode (10th); st 0A is LISTEN
    awk -v inode="$i" '$4 == "0A" && $10 == inode { print $2 }' /proc/net/tcp /proc/net/tcp6
  done
}

# loopback: 127.x.x.x (0100007F little-endian on IPv4) or ::1 (IPv6)
check_loopback() {
  local what=$1 sockets=$2 bad=""
  for s in $sockets; do
    addr=${s%:*}
    case "$addr" in
      ??????7F) ;;                                  # 127.0.0.0/8
      00000000000000000000000001000000) ;;          # ::1
      0000000000000000FFFF0000??????7F) ;;          # ::ffff:127.x.x.x
      *) bad="$bad $s" ;;
    esac
  done
  if [ -n "$bad" ]; then echo "$what listens beyond loopback:$bad (all: $sockets)"; exit 1; fi
}

cat > "$tmp/wait.lua" <<'LUA'
-- joins the world, makes a Gloo connection, signals, then waits in a collective until told to stop
slapo.dist.all_reduce(slapo.ones({ 1 }))
if slapo.dist.rank() == 0 then io.open(arg[1] .. "/ready", "w"):close() end
while not io.open(arg[1] .. "/stop") do os.execute("sleep 0.1") end
slapo.dist.barrier()
LUA

# wait_and_check WHAT: waits for $tmp/ready, checks the sockets of $pid, lets the job finish
wait_and_check() {
  for _ in $(seq 600); do [ -f "$tmp/ready" ] && break; sleep 0.1; done
  [ -f "$tmp/ready" ] || { echo "$1: the ranks never got ready"; cat "$tmp/out"; exit 1; }
  check_loopback "$1" "$(listening "$pid")"
  touch "$tmp/stop"
  wait "$pid" || { echo "$1 failed:"; cat "$tmp/out"; exit 1; }
  pid=""
  rm -f "$tmp/ready" "$tmp/stop"
}

# The check itself sees listeners: two ranks started by hand with torchrun's variables rendezvous
# over a TCPStore, whose server socket rank 0 holds.
port=$(( 20000 + RANDOM % 20000 ))
(RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bin" run "$tmp/wait.lua" "$tmp" >"$tmp/out" 2>&1 &
 RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$bin" run "$tmp/wait.lua" "$tmp" >"$tmp/out1" 2>&1 &
 wait) &
pid=$!
for _ in $(seq 600); do [ -f "$tmp/ready" ] && break; sleep 0.1; done
[ -n "$(listening "$pid")" ] || { echo "the check saw no listener of a TCPStore rendezvous"; cat "$tmp/out"; exit 1; }
touch "$tmp/stop"
wait "$pid"
pid=""
rm -f "$tmp/ready" "$tmp/stop"

"$bin" run --nproc 2 "$tmp/wait.lua" "$tmp" >"$tmp/out" 2>&1 &
pid=$!
wait_and_check "run --nproc 2"

mkdir "$tmp/spec"
cat > "$tmp/spec/wait_spec.lua" <<LUA
it("waits", function()
  slapo.dist.all_reduce(slapo.ones({ 1 }))
  if slapo.dist.rank() == 0 then io.open("$tmp/ready", "w"):close() end
  while not io.open("$tmp/stop") do os.execute("sleep 0.1") end
  slapo.dist.barrier()
  eq(2, slapo.dist.world_size())
end)
LUA
"$bin" test --nproc 2 "$tmp/spec" >"$tmp/out" 2>&1 &
pid=$!
wait_and_check "test --nproc 2"
# the tuner's trial runs (each one a 2-rank launch of its own)
cat > "$tmp/trial.lua" <<LUA
local size = slapo.knob("size", {1}, 1)
slapo.dist.all_reduce(slapo.ones({ size }))
if slapo.dist.rank() == 0 then io.open("$tmp/ready", "w"):close() end
while not io.open("$tmp/stop") do os.execute("sleep 0.1") end
slapo.dist.barrier()
slapo.report({ step_s = 1 })
LUA
(cd "$tmp" && exec "$bin" tune trial.lua --nproc 2 --db "$tmp/tune.jsonl" >"$tmp/out" 2>&1) &
pid=$!
wait_and_check "a tune trial on 2 ranks"

# run --watch (one process: the watcher and the script it reruns)
cp "$tmp/wait.lua" "$tmp/watched.lua"
"$bin" run --watch "$tmp/watched.lua" "$tmp" >"$tmp/out" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -f "$tmp/ready" ] && break; sleep 0.1; done
[ -f "$tmp/ready" ] || { echo "run --watch: the ranks never got ready"; cat "$tmp/out"; exit 1; }
check_loopback "run --watch" "$(listening "$pid")"
touch "$tmp/stop"
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=""

echo "one-machine runs, specs, tune trials and --watch listen on loopback only"
