#!/usr/bin/env bash
# An installed copy (cmake --install to a prefix) runs on its own: the stdlib and the device profiles
# are found beside the executable, not in the source tree it was built from; SLAPO_STDLIB still wins.
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

# the planner's measured H100 profile comes with it: docs/planner.md's example, from a folder with no
# checkout around it
[ -f "$tmp/prefix/share/slapo-lua/stdlib/devices/h100.json" ]
(cd "$tmp" && env -u SLAPO_STDLIB -u SLAPO_DEVICES "$tmp/prefix/bin/slapo-lua" plan gpt3-6.7b \
  --cluster 8x8:h100 --batch 1024 --seq 2048 --dtype bfloat16 >"$tmp/plan.out" 2>&1) || { cat "$tmp/plan.out"; exit 1; }
grep -q "chosen" "$tmp/plan.out" || { cat "$tmp/plan.out"; exit 1; }
# SLAPO_DEVICES names another folder of profiles
mkdir "$tmp/devices"
if (cd "$tmp" && SLAPO_DEVICES="$tmp/devices" "$tmp/prefix/bin/slapo-lua" plan gpt2 --cluster 1x2:h100 \
  >"$tmp/plan.out" 2>&1); then
  echo "SLAPO_DEVICES was ignored: an empty folder of profiles still planned for h100"; exit 1
fi
grep -q "$tmp/devices/h100.json" "$tmp/plan.out" || { cat "$tmp/plan.out"; exit 1; }

# the SentencePiece module comes with it (where the build has one) and is found from the prefix
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
model="${SLAPO_DATA_DIR:-$root/data}/llama2-tokenizer/tokenizer.model"
sentencepiece="no SentencePiece model here"
if [ -f "$build_dir/libslapo_sentencepiece.so" ] && [ -f "$model" ]; then
  [ -f "$tmp/prefix/lib/slapo-lua/libslapo_sentencepiece.so" ]
  ids=$(cd "$tmp" && "$tmp/prefix/bin/slapo-lua" run <(echo 'print(slapo.json_encode(slapo.tokenizer(arg[1]):encode("Hello world")))') "$model")
  [ "$ids" = "[1,15043,3186]" ] || { echo "the installed copy's SentencePiece gave $ids"; exit 1; }
  sentencepiece="SentencePiece module included"
fi
echo "installed copy runs from its prefix, device profiles included, $sentencepiece"
