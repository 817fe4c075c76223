#!/usr/bin/env bash
# run --profile writes a chrome trace with a span per module call, named by type and path.
set -euo pipefail
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/step.lua" <<'LUA'
slapo.manual_seed(0)
local m = slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64, n_positions = 16 })
local sch = slapo.create_schedule(m)
local ids = slapo.randint(0, 64, { 2, 8 })
m(ids, { labels = ids }):backward()
LUA
"$bin" run --profile "$tmp/trace.json" "$tmp/step.lua" 2>"$tmp/err"
grep -q "^profile: wrote $tmp/trace.json" "$tmp/err" || { echo "run --profile should say where it wrote:"; cat "$tmp/err"; exit 1; }
/usr/bin/python3 - "$tmp/trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
names = {e.get("name") for e in events}
for wanted in ("GPT2Attention transformer.h.0.attn", "Conv1D transformer.h.1.mlp.c_fc", "aten::addmm"):
    assert wanted in names, (wanted, sorted(n for n in names if n)[:20])
spans = [e for e in events if e.get("name") == "GPT2Block transformer.h.0"]
assert spans and all("dur" in e for e in spans), spans[:2]
PY
"$bin" run --nproc 2 --profile "$tmp/multi.json" "$tmp/step.lua"
[ -s "$tmp/multi-rank0.json" ]
[ -s "$tmp/multi-rank1.json" ]
# a path LibTorch could not write at the end is refused before the script runs
set +e
"$bin" run --profile "$tmp/step.lua/trace.json" "$tmp/step.lua" >"$tmp/out" 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "an unwritable --profile path should exit 1, got $rc"; cat "$tmp/out"; exit 1; }
grep -q "run: --profile '$tmp/step.lua/trace.json' cannot be written" "$tmp/out" || { cat "$tmp/out"; exit 1; }
echo "profile ok"
