#!/usr/bin/env bash
# The harness tells the truth: scripts/tally.sh (how scripts/test reads every suite) is fed suites
# that pass, fail, hang, crash, check nothing, skip and exit with the wrong code (tests/harness),
# and each must be reported as what it is.
set -euo pipefail
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fixtures="$root/tests/harness"
cd "$root"
source scripts/tally.sh

# expect NAME PASSED FAILED SKIPPED: the totals tally has added up since the last call
seen_p=0 seen_f=0 seen_s=0
expect() {
  local name=$1 p=$(( passed - seen_p )) f=$(( failed - seen_f )) s=$(( skipped - seen_s ))
  seen_p=$passed seen_f=$failed seen_s=$skipped
  if [ "$p $f $s" != "$2 $3 $4" ]; then
    echo "harness misreported $name: $p passed, $f failed, $s skipped; expected $2 passed, $3 failed, $4 skipped"
    exit 1
  fi
}
run() { echo "--- $1"; tally_suite "$@"; }

run passing "$bin" test "$fixtures/passing_spec.lua"
expect "a passing suite with a skip" 1 0 1
run failing "$bin" test "$fixtures/failing_spec.lua"
expect "a failing case" 1 1 0
run zero "$bin" test "$fixtures/zero_assertion_spec.lua"
expect "a case that checked nothing" 0 1 0
run skipped "$bin" test "$fixtures/all_skipped_spec.lua"
expect "a suite that skipped everything" 0 1 1
run hung env SLAPO_DIST_TIMEOUT=3 "$bin" test --nproc 2 "$fixtures/hung_rank_spec.lua"
expect "a hung rank after a clean summary" 1 1 0
run crashed "$bin" test --nproc 2 "$fixtures/crashed_rank_spec.lua"
expect "a crashed rank" 1 1 0
run "no summary" bash -c 'echo "3 passed"; exit 0'
expect "a runner that died before its summary" 0 1 0
run "wrong exit code" bash -c 'echo "4 passed, 0 failed, 0 skipped"; exit 2'
expect "a summary of 0 failed with exit code 2" 4 1 0

tally_script ok "$fixtures/exit_0.sh"
expect "a script that exits 0" 1 0 0
tally_script fail "$fixtures/exit_1.sh"
expect "a script that exits 1" 0 1 0
tally_script skip "$fixtures/exit_77_skip.sh"
expect "a script that skips with its reason" 0 0 1
tally_script "skip without reason" "$fixtures/exit_77_without_reason.sh"
expect "a script that skips without a reason" 0 1 0

# the closing line carries all three, and fails while anything failed
if report=$(tally_report); then echo "tally_report passed with failures"; exit 1; fi
[ "$(tail -1 <<<"$report")" = "$passed passed, $failed failed, $skipped skipped" ]
echo "the harness reports passes, failures, hangs, crashes, empty cases, skips and exit codes as they are"
