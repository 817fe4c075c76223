# Helpers for the tests/cli scripts (sourced). Under `set -e` a check written `cond && check` is
# skipped, not failed, when cond is false: these fail loudly instead.

# expect_code WANT GOT [CONTEXT]: the exit code was WANT
expect_code() {
  if [ "$2" -ne "$1" ]; then
    echo "expected exit code $1, got $2${3:+ ($3)}"
    exit 1
  fi
}

# same_token_ids REFERENCE.json OURS.json LABEL: two JSON arrays of token ids are equal, or the first
# difference is shown
same_token_ids() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
ref, ours = json.load(open(sys.argv[1])), [int(i) for i in json.load(open(sys.argv[2]))]
if ref != ours:
    at = next((i for i, (a, b) in enumerate(zip(ref, ours)) if a != b), min(len(ref), len(ours)))
    print(f"{sys.argv[3]}: ids differ from the reference's at {at} of {len(ref)} (ours {len(ours)}): "
          f"reference {ref[max(0, at - 3):at + 5]}, ours {ours[max(0, at - 3):at + 5]}")
    sys.exit(1)
print(f"{sys.argv[3]}: {len(ours)} ids equal to the reference's")
PY
}
