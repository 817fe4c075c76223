#!/usr/bin/env bash
# slapo-lua tune from the command line: an example tuned on 2 ranks, the leaderboard, --knob on
# run, a tuner killed mid-trial that leaves no process behind and resumes where it stopped, and a
# database that is a directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
root="$(pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# 1. the GPT-2 example's knobs (checkpoint, batch, tp) on 2 ranks, 3 trials of a tiny model
small=(--steps 3 --layers 1 --hidden 64 --heads 4 --vocab 512 --seq 32)
"$bin" tune "$root/examples/gpt2_schedule.lua" --nproc 2 --budget 3 --db ex.jsonl -- "${small[@]}" >out 2>&1 \
  || { cat out; exit 1; }
grep -q "trial 1 with the defaults" out
grep -Eq "^tune: \[defaults\] \{checkpoint = 0, batch = [0-9]+, tp = [0-9]+\} [0-9,]+ tok/s in [0-9]+:[0-9]{2}$" out \
  || { echo "the first trial's result is not printed:"; cat out; exit 1; }
grep -q "budget of 3 trials spent; 33 configurations not measured yet" out || { cat out; exit 1; }
grep -q "slapo-lua run --nproc 2 --knob checkpoint=0 --knob batch=" out
[ "$(wc -l <ex.jsonl)" -eq 3 ]
[ "$(grep -c '"status":"ok"' ex.jsonl)" -eq 3 ] || { cat ex.jsonl; exit 1; }
grep -q '"tokens_per_s":[1-9]' ex.jsonl
"$bin" tune --show ex.jsonl >show
grep -q "gpt2_schedule.lua (version [0-9a-f]*, 2 ranks)" show
grep -q "^| 1 | {checkpoint = 0, batch = " show
grep -q "^best: [^ ]*slapo-lua run --nproc 2 --knob" show

# 2. run --knob: a chosen value, a value not among the choices, a knob the script lacks, a constraint
cat >knobbed.lua <<'LUA'
local b = slapo.knob("batch", {4, 8}, 4)
print("batch " .. b)
LUA
"$bin" run --knob batch=8 knobbed.lua | grep -q "batch 8"
set +e
"$bin" run --knob batch=5 knobbed.lua >/dev/null 2>err; rc=$?
set -e
expect_code 1 "$rc"
grep -q "knob 'batch': 5 is not one of the choices {4, 8}" err
"$bin" run --knob bacth=8 knobbed.lua 2>err | grep -q "batch 4"
grep -q "warning: --knob bacth: the script declared no such knob (declared: batch)" err
# a chosen configuration that breaks a knob's constraint: the script's line, no traceback
cat >constrained.lua <<'LUA'
local tp = slapo.knob("tp", {1, 2}, 1)
local mb = slapo.knob("mb", {1, 4}, 1, {constraint = function(c) return c.tp * c.mb <= 4 end})
LUA
set +e
"$bin" run --knob tp=2 --knob mb=4 constrained.lua >/dev/null 2>err; rc=$?
set -e
expect_code 1 "$rc"
grep -q "constrained.lua:2: knob: the configuration {tp = 2, mb = 4} breaks the constraint of knob 'mb'" err \
  || { cat err; exit 1; }
if grep -q "traceback" err; then echo "a traceback for a configuration to change:"; cat err; exit 1; fi

# 3. killed mid-trial: the trial goes with the tuner; the next run measures what is missing
cat >hang.lua <<'LUA'
local x = slapo.knob("x", {1, 2}, 1)
if x == 2 and io.open(os.getenv("HANG_MARKER") or "") then
  while true do end
end
slapo.report({step_s = 1 / x})
LUA
touch marker
HANG_MARKER="$tmp/marker" "$bin" tune hang.lua --db hang.jsonl --timeout 300 >tune.out 2>&1 &
tuner=$!
for _ in $(seq 100); do
  [ -s hang.jsonl ] && [ -e hang.jsonl.logs/trial-002.log ] && break
  sleep 0.1
done
sleep 0.5
kill -9 $tuner
wait $tuner 2>/dev/null || true
sleep 0.5
if pgrep -f "run $tmp/hang.lua|run hang.lua" >/dev/null; then
  echo "a trial outlived its tuner:"; pgrep -af "hang.lua"; exit 1
fi
[ "$(wc -l <hang.jsonl)" -eq 1 ]
rm marker
HANG_MARKER="$tmp/marker" "$bin" tune hang.lua --db hang.jsonl --timeout 300 >tune.out 2>&1 || { cat tune.out; exit 1; }
grep -q "1 trials run, 0 pruned, 1 from hang.jsonl" tune.out || { cat tune.out; exit 1; }
grep -q "best 1.0000 s/step\|best .* {x = 2}" tune.out || { cat tune.out; exit 1; }
[ "$(wc -l <hang.jsonl)" -eq 2 ]

# 4. a database that is a directory: refused by name, before its logs directory is made
mkdir results
set +e
"$bin" tune hang.lua --db results >/dev/null 2>err; rc=$?
set -e
expect_code 1 "$rc" "tune --db DIR"
want="slapo-lua: tune: the database 'results' is a directory; give a file in it, such as 'results/tune.jsonl'"
[ "$(head -1 err)" = "$want" ] || { cat err; exit 1; }
[ ! -e results.logs ] || { echo "tune --db DIR made DIR.logs"; exit 1; }
set +e
"$bin" tune --show results/ >/dev/null 2>err; rc=$?
set -e
expect_code 1 "$rc" "tune --show DIR"
want="slapo-lua: tune --show: the database 'results/' is a directory; give a file in it, such as 'results/tune.jsonl'"
[ "$(head -1 err)" = "$want" ] || { cat err; exit 1; }

set +e
"$bin" tune >/dev/null 2>err; rc=$?
set -e
expect_code 2 "$rc"
grep -q "tune: give a SCRIPT to tune, or --show DB" err
# the defaults trial's line carries its prediction, as every other trial's does
cat > predicted.lua <<'LUA'
local c = slapo.knob("c", {1, 2, 3}, 2)
slapo.predict({ {c = 3, step_s = 0.1}, {c = 2, step_s = 0.3} })
slapo.report({step_s = 1 / c})
LUA
"$bin" tune predicted.lua --budget 1 --db predicted.jsonl > predicted.out 2>&1
grep -q '^tune: \[defaults\] {c = 2} 0.5000 s/step in .* (predicted 0.3000 s/step)$' predicted.out \
  || { cat predicted.out; exit 1; }
echo "tune ok: $(grep -c . ex.jsonl) trials of the GPT-2 example on 2 ranks; resumed after kill -9"
