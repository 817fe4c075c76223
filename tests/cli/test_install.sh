#!/usr/bin/env bash
# An installed copy (cmake --install to a prefix) runs on its own: the stdlib is found beside the
# executable, not in the source tree it was built from; SLAPO_STDLIB still wins.
set -euo pipefail
bin="$1"
build_dir="$(cd "$(dirname "$bin")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
[ -x "$tmp/prefix/bin/slapo-lua" ]
[ -f "$tmp/prefix/share/slapo-lua/stdlib/slapo/schedules/gpt2.lua" ]

cat > "$tmp/where.lua" <<'LUA'
local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 16, n_head = 2, n_layer = 1, vocab_size = 32 }))
require("slapo.schedules.gpt2").schedule(sch, {})
print(package.searchpath("slapo.schedules.gpt2", package.path))
LUA
# from elsewhere, with no hint where the checkout is
where=$(cd "$tmp" && env -u SLAPO_STDLIB "$tmp/prefix/bin/slapo-lua" run where.lua)
case "$where" in
  "$tmp/prefix/share/slapo-lua/stdlib/"*) ;;
  *) echo "the installed copy loaded its stdlib from $where"; exit 1 ;;
esac
# SLAPO_STDLIB wins over the installed copy
mkdir -p "$tmp/mine/slapo/schedules"
cp -r "$tmp/prefix/share/slapo-lua/stdlib/." "$tmp/mine/"
where=$(cd "$tmp" && SLAPO_STDLIB="$tmp/mine" "$tmp/prefix/bin/slapo-lua" run where.lua)
case "$where" in
  "$tmp/mine/"*) ;;
  *) echo "SLAPO_STDLIB was ignored: $where"; exit 1 ;;
esac
echo "installed copy runs from its prefix"
