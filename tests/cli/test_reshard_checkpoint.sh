#!/usr/bin/env bash
# Training checkpoints reshard: a run fully sharded on 2 ranks saves at step 3; runs on other
# layouts and other numbers of ranks (TP 2, whole on 1 rank, fully sharded on 4, TP 2 x fully
# sharded 2) resume from it and follow the uninterrupted run's losses (1e-5); the same layout
# follows them bit for bit. Every rank reads only its slices (io/sharded_checkpoint.cpp).
set -euo pipefail
bin="$1"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SLAPO_DIST_TIMEOUT="${SLAPO_DIST_TIMEOUT:-60}"

losses() {  # losses NPROC LAYOUT STEPS DIR [RESUME]: the "losses" line's fields
  "$bin" run --nproc "$1" "$here/reshard_gpt2.lua" "$2" "$3" "$4" ${5:+"$5"} 2>&1 | tee "$tmp/last.log" |
    sed -n 's/^losses //p'
}
# within(want, got, rtol): every step of got is within rtol of want's
within() {
  awk -v want="$1" -v got="$2" -v rtol="$3" 'BEGIN {
    n = split(want, w, " "); m = split(got, g, " ")
    for (i = 1; i <= n; i++) { split(w[i], kv, "="); ref[kv[1]] = kv[2] }
    if (m == 0) { print "no losses"; exit 1 }
    for (i = 1; i <= m; i++) {
      split(g[i], kv, "=")
      d = kv[2] - ref[kv[1]]; if (d < 0) d = -d
      if (!(kv[1] in ref) || d > rtol * ref[kv[1]]) { printf "step %s: %s, uninterrupted %s\n", kv[1], kv[2], ref[kv[1]]; exit 1 }
    }
  }'
}

full=$(losses 2 fully 6 "$tmp/ckpt")
[ -n "$full" ] || { cat "$tmp/last.log"; exit 1; }
test -f "$tmp/ckpt/step-000003/index.json"
echo "uninterrupted, fully sharded on 2 ranks: $full"

# the same layout: bit for bit
same=$(losses 2 fully 6 "$tmp/same" "$tmp/ckpt/step-000003")
expected=$(echo "$full" | tr ' ' '\n' | grep -E '^[456]=' | tr '\n' ' ' | sed 's/ $//')
[ "$same" = "$expected" ] || { echo "same layout: $same, uninterrupted: $expected"; cat "$tmp/last.log"; exit 1; }

for run in "2 tp" "1 whole" "4 fully" "4 2d"; do
  read -r n layout <<<"$run"
  got=$(losses "$n" "$layout" 6 "$tmp/out-$n-$layout" "$tmp/ckpt/step-000003")
  echo "resumed on $n ranks, $layout: $got"
  within "$full" "$got" 1e-5 || { cat "$tmp/last.log"; exit 1; }
done

# an index edited on purpose: its checksum in trainer.json recorded again, as if it were saved so
cat >"$tmp/rechecksum.lua" <<'LUA'
local util = require("slapo.util")
local trainer = slapo.json_decode(util.read_file(arg[1] .. "/trainer.json"))
trainer.files["index.json"] = slapo._crc32_file(arg[1] .. "/index.json")
util.write_file(arg[1] .. "/trainer.json", slapo.json_encode(trainer))
LUA
rechecksum() { "$bin" run "$tmp/rechecksum.lua" "$1"; }

# the control: without AdamW's moments (the index's optimizer section gone) the losses leave the
# uninterrupted run's, so the comparisons above see the optimizer state
cp -r "$tmp/ckpt/step-000003" "$tmp/no-moments"
sed -i 's/"optimizer":/"ignored":/' "$tmp/no-moments/index.json"
rechecksum "$tmp/no-moments"
got=$(losses 1 whole 6 "$tmp/out-control" "$tmp/no-moments")
[ -n "$got" ] || { echo "the control did not train:"; cat "$tmp/last.log"; exit 1; }
if within "$full" "$got" 1e-5 >/dev/null; then
  echo "resumed without the moments and still within 1e-5: $got"
  exit 1
fi

# a changed index is caught by its checksum, on 2 ranks as on 1, before any tensor is read
cp -r "$tmp/ckpt/step-000003" "$tmp/half"
echo 'slapo._write_piece_index(arg[1], { "model-rank0.safetensors", "optimizer-rank0.safetensors" })' >"$tmp/half.lua"
"$bin" run "$tmp/half.lua" "$tmp/half"
set +e
"$bin" run --nproc 2 "$here/reshard_gpt2.lua" fully 6 "$tmp/out-changed" "$tmp/half" >"$tmp/changed.log" 2>&1; rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "resumed from a changed index"; exit 1; }
grep -qF "resume: $tmp/half/index.json is not the file that was saved (its CRC-32 differs from the" "$tmp/changed.log" ||
  { cat "$tmp/changed.log"; exit 1; }
# an index that lost rank 1's pieces, its checksum recorded as if it were written so, leaves half of
# each sliced tensor uncovered: named, not zeros
rechecksum "$tmp/half"
set +e
"$bin" run --nproc 1 "$here/reshard_gpt2.lua" whole 6 "$tmp/out-half" "$tmp/half" >"$tmp/half.log" 2>&1; rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "resumed from half the pieces"; exit 1; }
grep -q "resume: the pieces in '$tmp/half' do not cover '[a-z_.0-9]*' \[[0-9, ]*\]: no piece holds element \[" \
  "$tmp/half.log" || { cat "$tmp/half.log"; exit 1; }

# and back: a TP 2 x fully sharded checkpoint on 4 ranks resumes fully sharded on 2
losses 4 2d 3 "$tmp/ckpt2d" >/dev/null
got=$(losses 2 fully 6 "$tmp/back" "$tmp/ckpt2d/step-000003")
within "$full" "$got" 1e-5 || { cat "$tmp/last.log"; exit 1; }
echo "reshard ok"
