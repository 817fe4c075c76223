#!/usr/bin/env bash
# slapo-lua plan: the table of uniform plans, the plan as a Lua script that trains on the ranks it
# planned for, and clear errors for clusters and workloads that cannot work.
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" plan gpt2 --cluster 1x2:cpu --batch 4 --seq 32 --steps 2 --out "$tmp/plan.lua" >"$tmp/table"
grep -q "plan for gpt2 (123.5M parameters) on 1 x 2 cpu, batch 4 x seq 32" "$tmp/table"
grep -q "chosen" "$tmp/table"
[ "$(grep -c "slower\|needs" "$tmp/table")" -ge 3 ] || { echo "alternatives missing:"; cat "$tmp/table"; exit 1; }
grep -q '^local plan = {' "$tmp/plan.lua"
"$bin" run --nproc 2 "$tmp/plan.lua" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
grep -q "plan: 2 steps, final loss" "$tmp/out"

# an edited plan runs too: data parallel with ZeRO-1 instead
sed -e 's/^  tp = [0-9]*,/  tp = 1,/' -e 's/^  dp = [0-9]*,/  dp = 2,/' -e 's/^  zero = false,/  zero = true,/' \
  "$tmp/plan.lua" >"$tmp/edited.lua"
"$bin" run --nproc 2 "$tmp/edited.lua" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
grep -q "plan: 2 steps, final loss" "$tmp/out"

# the plan's script declares its plans as knobs with the planner's predictions: the tuner runs the
# best predicted first, and --from-plan 2 only the two best (here on a tiny checkpoint)
tiny="$(cd ../shared/fixtures/hf/gpt2-tiny && pwd)"
"$bin" plan "$tiny" --cluster 1x2:cpu --batch 4 --seq 16 --steps 3 --out "$tmp/tiny.lua" >/dev/null
grep -q '^slapo.predict({' "$tmp/tiny.lua"
(cd "$tmp" && "$bin" tune tiny.lua --nproc 2 --from-plan 2 --db "$tmp/tune.jsonl" >"$tmp/tune.out" 2>&1) \
  || { cat "$tmp/tune.out"; exit 1; }
[ "$(grep -c '"status":"ok"' "$tmp/tune.jsonl")" -eq 2 ] || { cat "$tmp/tune.out" "$tmp/tune.jsonl"; exit 1; }
grep -q "predicted [0-9.]* s/step" "$tmp/tune.out"
"$bin" run --nproc 2 --knob tp=2 --knob zero=false "$tmp/tiny.lua" 2>&1 | grep -q "2 steps\|3 steps, final loss" \
  || { echo "the plan script does not run with --knob tp=2"; exit 1; }

# every kind of plan the planner writes for 4 ranks verifies against the unscheduled model and trains
"$bin" plan "$tiny" --cluster 1x4:cpu --batch 8 --seq 16 --steps 2 --out "$tmp/four.lua" >/dev/null
for knobs in "" "--knob tp=2 --knob checkpoint=1" "--knob tp=4 --knob zero=false"; do
  # shellcheck disable=SC2086
  "$bin" run --nproc 4 $knobs "$tmp/four.lua" >"$tmp/four.out" 2>&1 || { cat "$tmp/four.out"; exit 1; }
  grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/four.out" \
    || { echo "plan with '$knobs' did not verify:"; cat "$tmp/four.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/four.out"
done

# profile-device measures this machine into a profile the planner reads
"$bin" profile-device --quick --out "$tmp/dev.json" >"$tmp/profile.out"
grep -q "| 256 x 256 x 256 | float32 |" "$tmp/profile.out"
grep -q '"memory_shared": true' "$tmp/dev.json"
"$bin" plan gpt2 --cluster 1x2:"$tmp/dev.json" --batch 4 --seq 32 >"$tmp/table2"
grep -q "on 1 x 2 cpu" "$tmp/table2"
set +e
"$bin" profile-device --device cuda >/dev/null 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "profile-device: --device cuda, but this build of LibTorch sees no CUDA device" "$tmp/err"

# errors name the option
set +e
"$bin" plan gpt2 --cluster 2:cpu >/dev/null 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "plan: --cluster '2:cpu' is not NODESxDEVICES:DEVICE" "$tmp/err"
set +e
"$bin" plan gpt2-large --cluster 1x1:cpu --batch 4096 --seq 1024 >/dev/null 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "does not fit 1 x 1: the most sharded plan" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "plan ok: $(sed -n 3p "$tmp/table" | sed 's/  */ /g')"
