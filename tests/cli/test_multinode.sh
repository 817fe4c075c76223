#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair, with private addresses
# that exist only inside them, and one launcher in each (`run --nnodes 2 --node-rank R
# --master-addr 10.213.47.1 --nproc 2`). GPT-2 trains at TP = 2 inside each node x DP = 2 across
# them with the losses of one process on all rows, and while the job runs every socket it holds in
# LISTEN state is bound to its node's own address or to loopback, never to every interface. With
# --max-restarts 1, a rank that exits mid-training makes both launchers start every rank again,
# and slapo.train resumes from its last checkpoint with the losses of the uninterrupted run. Then
# the faults, each bounded by the collective timeout plus 10 s and named by both launchers: node
# 1's launcher killed with SIGKILL, and the link cut mid-training.
# Needs root (CI runs as root); skips, saying why, where namespaces cannot be made.
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"

[ "$(id -u)" = 0 ] || { echo "skip: network namespaces need root"; exit 77; }
command -v ip >/dev/null || { echo "skip: no ip command (iproute2)"; exit 77; }
tag=$$
ns0=slapo-n0-$tag ns1=slapo-n1-$tag veth0=slv0-$tag veth1=slv1-$tag
addr0=10.213.47.1 addr1=10.213.47.2
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  ip netns del "$ns0" 2>/dev/null || true
  ip netns del "$ns1" 2>/dev/null || true  # deleting a namespace deletes its end of the veth pair
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns0" 2>"$tmp/err" || { echo "skip: cannot create a network namespace: $(cat "$tmp/err")"; exit 77; }
ip netns add "$ns1"
ip link add "$veth0" netns "$ns0" type veth peer name "$veth1" netns "$ns1"
ip -n "$ns0" addr add "$addr0/24" dev "$veth0"
ip -n "$ns1" addr add "$addr1/24" dev "$veth1"
for ns in "$ns0" "$ns1"; do ip -n "$ns" link set lo up; done
ip -n "$ns0" link set "$veth0" up
ip -n "$ns1" link set "$veth1" up

# One launcher per namespace; arguments after the namespace go to `run`.
timeout=60 port=29400
launch() {
  local node=$1 ns=$2
  shift 2
  ip netns exec "$ns" env SLAPO_DIST_TIMEOUT="$timeout" "$bin" run --nnodes 2 --node-rank "$node" \
    --master-addr "$addr0" --master-port "$port" --nproc 2 "$@" >"$tmp/node$node.out" 2>&1 &
  pids+=($!)
}

# LISTEN sockets (hex ADDRESS:PORT, as /proc writes them) of a process and its descendants, read
# in their own namespace. (Gloo closes a pair's listening socket once the pair is connected, so
# after training only node 0's store listens; a wildcard bind shows as 00000000.)
listening() {
  local p inodes
  for p in $(pstree -p "$1" | grep -oE '\([0-9]+\)' | tr -d '()'); do
    inodes=$(ls -l "/proc/$p/fd" 2>/dev/null | grep -oE 'socket:\[[0-9]+\]' | grep -oE '[0-9]+' || true)
    for i in $inodes; do
      awk -v inode="$i" '$4 == "0A" && $10 == inode { print $2 }' "/proc/$p/net/tcp" "/proc/$p/net/tcp6" 2>/dev/null || true
    done
  done | sort -u
}
hex_ip() { local IFS=.; set -- $1; printf '%02X%02X%02X%02X' "$4" "$3" "$2" "$1"; }

# only_on NODE ADDRESS SOCKETS: every socket is on ADDRESS or loopback
only_on() {
  local own bad="" s addr
  own=$(hex_ip "$2")
  for s in $3; do
    addr=${s%:*}
    case "$addr" in
      "$own" | ??????7F | 00000000000000000000000001000000 | 0000000000000000FFFF0000"$own") ;;
      *) bad="$bad $s" ;;
    esac
  done
  if [ -n "$bad" ]; then echo "node $1 listens beyond $2 and loopback:$bad (all: $3)"; exit 1; fi
}

# wait_for FILE SECONDS: until FILE exists or a launcher has ended
wait_for() {
  for _ in $(seq $(( $2 * 10 ))); do
    [ -f "$1" ] && return 0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done
    sleep 0.1
  done
  return 1
}
show() { for n in 0 1; do echo "--- node $n"; cat "$tmp/node$n.out"; done; }
# ended_within SECONDS: waits at most SECONDS for both processes to end and leaves their exit
# codes in codes[0] and codes[1]; false, with both still running, when time is up
codes=()
ended_within() {
  local start=$SECONDS n
  for n in 0 1; do
    while kill -0 "${pids[$n]}" 2>/dev/null && [ $((SECONDS - start)) -le "$1" ]; do sleep 0.2; done
    if kill -0 "${pids[$n]}" 2>/dev/null; then return 1; fi
  done
  for n in 0 1; do
    codes[$n]=0
    wait "${pids[$n]}" || codes[$n]=$?
  done
  pids=()
}
# expect_clean_end WHAT SECONDS: both processes end within SECONDS, with exit code 0
expect_clean_end() {
  local n
  ended_within "$2" || { echo "$1: still running $2 s later"; show; exit 1; }
  for n in 0 1; do expect_code 0 "${codes[$n]}" "$1, node $n: $(cat "$tmp/node$n.out")"; done
}
# stop_cleanly WHAT: lets the held job finish; both processes must exit 0
stop_cleanly() {
  touch "$tmp/stop"
  expect_clean_end "$1" 60
  rm -f "$tmp/ready" "$tmp/stop"
}

# The check sees what it must refuse: torchrun's contract by hand, one rank per namespace, where
# rank 0 serves LibTorch 1.13's TCPStore, which binds every interface.
cat > "$tmp/wait.lua" <<'LUA'
slapo.dist.all_reduce(slapo.ones({ 1 }))
if slapo.dist.rank() == 0 then io.open(arg[1] .. "/ready", "w"):close() end
while not io.open(arg[1] .. "/stop") do os.execute("sleep 0.1") end
slapo.dist.barrier()
LUA
for r in 0 1; do
  ns=$ns0 && [ $r = 0 ] || ns=$ns1
  ip netns exec "$ns" env RANK=$r WORLD_SIZE=2 MASTER_ADDR=$addr0 MASTER_PORT=29401 "$bin" run "$tmp/wait.lua" "$tmp" \
    >"$tmp/node$r.out" 2>&1 &
  pids+=($!)
done
wait_for "$tmp/ready" 120 || { echo "torchrun's contract across the namespaces never got ready"; show; exit 1; }
if (only_on 0 "$addr0" "$(listening "${pids[0]}")") >/dev/null; then
  echo "the check missed TCPStore's wildcard listener: $(listening "${pids[0]}")"
  exit 1
fi
stop_cleanly "torchrun's contract"

export MULTINODE_HOLD=$tmp
launch 0 "$ns0" "$here/multinode_gpt2.lua" 4
launch 1 "$ns1" "$here/multinode_gpt2.lua" 4
wait_for "$tmp/ready" 300 || { echo "the two-node job never finished training"; show; exit 1; }
only_on 0 "$addr0" "$(listening "${pids[0]}")"
only_on 1 "$addr1" "$(listening "${pids[1]}")"
# node 0's launcher serves the rendezvous on the master address and port
listening "${pids[0]}" | grep -q "^$(hex_ip "$addr0"):$(printf '%04X' "$port")$" ||
  { echo "node 0 does not serve the store on $addr0:$port: $(listening "${pids[0]}")"; exit 1; }
stop_cleanly "the two-node job"
grep -q "multinode ok" "$tmp/node0.out" || { echo "no result from rank 0"; show; exit 1; }
grep -o "multinode ok.*" "$tmp/node0.out"
echo "two nodes: trained as one process, listening only on their own addresses"

# expect_said NODE TEXT: the node's launcher said TEXT
expect_said() {
  grep -qF "$2" "$tmp/node$1.out" || { echo "node $1 did not say '$2':"; show; exit 1; }
}

# --max-restarts 1: the last rank exits after step 5 of 8; both nodes restart and resume from the
# step-4 checkpoint (on the filesystem both namespaces share), and the losses still match
port=$((port + 1))
MULTINODE_HOLD= MULTINODE_CHECKPOINTS=$tmp/ck MULTINODE_FAIL_AT=5 launch 0 "$ns0" --max-restarts 1 "$here/multinode_gpt2.lua" 8
MULTINODE_HOLD= MULTINODE_CHECKPOINTS=$tmp/ck MULTINODE_FAIL_AT=5 launch 1 "$ns1" --max-restarts 1 "$here/multinode_gpt2.lua" 8
expect_clean_end "the restarted job" 300
for n in 0 1; do expect_said $n "restarting every rank (restart 1 of 1, --max-restarts)"; done
expect_said 1 "rank 3 of 4 failed: exited with code 3"
grep -q "multinode ok: .* (attempt 1)" "$tmp/node0.out" || { echo "no resumed result from rank 0"; show; exit 1; }
echo "a rank lost mid-training: both nodes restarted and resumed with the same losses"

# fault NAME ACTION: starts a long training, runs ACTION mid-training, then checks that both
# launchers end non-zero within the collective timeout plus 10 s; their messages are left in
# $tmp/node0.out and $tmp/node1.out.
fault() {
  local name=$1 action=$2 start n
  port=$((port + 1)) timeout=15
  MULTINODE_READY_AT=3 launch 0 "$ns0" "$here/multinode_gpt2.lua" 1000000
  MULTINODE_READY_AT=3 launch 1 "$ns1" "$here/multinode_gpt2.lua" 1000000
  wait_for "$tmp/ready" 300 || { echo "$name: the job never started training"; show; exit 1; }
  start=$SECONDS
  eval "$action"
  ended_within $((timeout + 10)) || { echo "$name: still running $((timeout + 10)) s later"; show; exit 1; }
  for n in 0 1; do [ "${codes[$n]}" -ne 0 ] || { echo "$name: node $n exited 0"; show; exit 1; }; done
  echo "$name: both nodes ended within $((SECONDS - start)) s"
  rm -f "$tmp/ready"
}

fault "node 1's launcher killed" 'kill -9 "${pids[1]}"'
expect_said 0 "node 0 stopped its ranks: node 1 is lost: its launcher's connection closed"

fault "the link cut" 'ip -n "$ns1" link set "$veth1" down'
expect_said 0 "node 0 stopped its ranks: node 1 is lost: its launcher has not been heard from"
expect_said 1 "node 1 stopped its ranks: node 0 is lost"
