# Helpers for the tests/cli scripts (sourced). Under `set -e` a check written `cond && check` is
# skipped, not failed, when cond is false: these fail loudly instead.

# expect_code WANT GOT [CONTEXT]: the exit code was WANT
expect_code() {
  if [ "$2" -ne "$1" ]; then
    echo "expected exit code $1, got $2${3:+ ($3)}"
    exit 1
  fi
}
