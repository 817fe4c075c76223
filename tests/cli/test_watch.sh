#!/usr/bin/env bash
# run --watch: reruns on save, survives a broken edit (showing its line), follows rename-saves.
set -euo pipefail
bin="$1"
tmp=$(mktemp -d)
log="$tmp/log"
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

wait_for() {  # text, in the log within 20 s
  for _ in $(seq 200); do grep -q "$1" "$log" && return 0; sleep 0.1; done
  echo "did not see '$1':"; cat "$log"; return 1
}

echo 'print("version 1")' > "$tmp/sched.lua"
"$bin" run --watch "$tmp/sched.lua" >"$log" 2>&1 &
pid=$!
wait_for "version 1"
wait_for "waiting for changes"

printf 'print("version 2"\n' > "$tmp/sched.lua"             # a broken edit, written in place
wait_for "sched.lua:2: ')' expected"
wait_for "fix it and save"

echo 'print("version 3")' > "$tmp/sched.new"                 # an editor's save: write, then rename over
mv "$tmp/sched.new" "$tmp/sched.lua"
wait_for "version 3"
kill -0 "$pid"  # still watching
echo "watch ok"
