# How scripts/test reads a suite's result (sourced; tests/cli/test_harness.sh checks it).
# A suite passes only when its summary line says so AND it exited 0: a launcher that had to stop a
# hung rank, a crashed rank or a runner that died before its summary is a failure whatever was
# printed. A skip is a result of its own, never a pass; a suite that skipped everything failed.
#
#   tally_suite NAME COMMAND...   runs a suite that ends "N passed, N failed, N skipped"
#   tally_script NAME SCRIPT ARGS runs one test script: exit 0 passed, 77 skipped (its last line
#                                 "skip: reason"), anything else failed
# Totals: $passed $failed $skipped; one line a suite in ${suites[@]}.
passed=0
failed=0
skipped=0
suites=()

# Adds one suite's counts (and a failure for each problem in $problems) to the totals.
_tally_add() {
  local name=$1 p=$2 f=$3 s=$4 problems=$5
  if [ -n "$problems" ]; then
    f=$((f + 1))
    echo "FAIL $name: $problems"
  fi
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  suites+=("$name: $p passed, $f failed, $s skipped")
}

tally_suite() {
  local name=$1 out rc=0
  shift
  out=$("$@" 2>&1) || rc=$?
  # the cases' own lines: failures, skips and the runner's errors, not the passes
  grep -vE "^(\[rank [0-9]+\] )?(ok |# )|^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$|^\[doctest\] (doctest version|run with)" \
    <<<"$out" || true
  local line p=0 f=0 s=0 problems=""
  line=$(grep -E "^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$" <<<"$out" | tail -1 || true)
  if [[ "$line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
    p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
      problems="no case ran ($s skipped)"
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      problems="its summary says nothing failed, but it exited with code $rc (a rank failed, hung or was stopped)"
    fi
  else
    problems="did not finish (exit code $rc, no summary line)"
  fi
  _tally_add "$name" "$p" "$f" "$s" "$problems"
}

tally_script() {
  local name=$1 log rc=0
  shift
  log=$(mktemp)
  bash "$@" >"$log" 2>&1 || rc=$?
  case $rc in
    0) echo "ok   $name: $(tail -1 "$log")"; _tally_add "$name" 1 0 0 "" ;;
    77)
      if grep -q "^skip: " "$log"; then
        echo "skip $name: $(grep "^skip: " "$log" | tail -1 | sed 's/^skip: //')"; _tally_add "$name" 0 0 1 ""
      else
        sed 's/^/     /' "$log"; _tally_add "$name" 0 0 0 "exited 77 (skipped) without a 'skip: reason' line"
      fi ;;
    *) sed 's/^/     /' "$log"; _tally_add "$name" 0 0 0 "exited with code $rc" ;;
  esac
  rm -f "$log"
}

# The closing line: "N passed, N failed, N skipped"; true when nothing failed.
tally_report() {
  printf '%s\n' "${suites[@]}"
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$failed" -eq 0 ]
}
