#!/usr/bin/env bash
# The plan scripts and autoshard schedules the planner writes for fifteen plans and four layers
# (tests/plan/write_golden.lua) are the ones recorded in tests/plan/golden/. A change that means
# to write them differently records them again:
#   build/slapo-lua run tests/plan/write_golden.lua tests/plan/golden
# and the diff in the commit shows what users' plan scripts gain or lose.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$1"
if [[ "$("$bin" run <(echo 'print(slapo.ilp_solver)'))" != cbc ]]; then
  echo "skipped: this build has no CBC (autoshard's recorded schedules are CBC's solutions)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" run "$root/tests/plan/write_golden.lua" "$tmp" >/dev/null
if ! diff -ru "$root/tests/plan/golden" "$tmp" >"$tmp.diff"; then
  cat "$tmp.diff"
  rm -f "$tmp.diff"
  echo "the plan scripts differ from tests/plan/golden (above); if that is meant, record them again:"
  echo "  build/slapo-lua run tests/plan/write_golden.lua tests/plan/golden"
  exit 1
fi
rm -f "$tmp.diff"
echo "plan golden ok: $(ls "$root/tests/plan/golden" | wc -l) scripts as recorded"
