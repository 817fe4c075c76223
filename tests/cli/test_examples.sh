#!/usr/bin/env bash
# The example schedules train: one rank, TP = 2, and TP = 2 x DP = 2; the loss falls.
set -euo pipefail
bin="$1"
small="--steps 3 --layers 2 --hidden 64 --heads 4 --vocab 512 --seq 16 --batch 2 --lr 0.01"

falls() {  # the last step's loss is below the first's; prints the run when it is not
  local out="$1"
  echo "$out" | awk '/^step /{ if (!first) first = $4; last = $4 } END { exit !(last < first) }' ||
    { echo "loss did not fall:"; echo "$out"; return 1; }
}

falls "$("$bin" run examples/gpt2_schedule.lua $small)"
falls "$("$bin" run --nproc 2 examples/bert_schedule.lua $small --checkpoint 0.5)"
out=$("$bin" run --nproc 4 examples/llama_schedule.lua $small --tp 2 --kv_heads 2)
echo "$out" | grep -q "tensor parallel 2 x data parallel 2"
falls "$out"
"$bin" run examples/fuse_bert.lua | grep -q "^verify: outputs match"
out=$("$bin" run examples/fuse_llama.lua)
[ "$(echo "$out" | grep -c " 1 fused: .*slapo::\(swiglu\|rms_norm\)")" -eq 6 ] || { echo "$out"; exit 1; }
echo "$out" | grep -q "^verify: outputs match"
falls "$("$bin" run --nproc 2 examples/pipeline_gpt2.lua)"
"$bin" run examples/inspect_bert.lua >/dev/null
# the tutorial's REPL start: the script's globals stay at the prompt
out=$(printf 'print(sch["transformer.h.0.attn"].path)\n' | "$bin" repl examples/explore_gpt2.lua)
echo "$out" | grep -q "^slapo> transformer.h.0.attn" || { echo "$out"; exit 1; }
"$bin" run examples/tour.lua >/dev/null
"$bin" run --nproc 2 examples/tour.lua >/dev/null  # shards after a backward whose loss is still alive
echo "examples ok"
