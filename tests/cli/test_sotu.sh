#!/usr/bin/env bash
# A small GPT-2 on real text: the loss falls clearly, metrics.jsonl is written and plots to SVG.
set -euo pipefail
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$("$bin" run examples/gpt2_sotu.lua --steps 40 --texts 3 --seq 32 --batch 4 --hidden 64 --layers 2 \
  --lr 3e-3 --warmup 5 --log_every 10 --metrics "$tmp/metrics.jsonl")
echo "$out" | tail -1
echo "$out" | awk '/^loss/ { exit !($4 < $2 - 2.0) }' || { echo "loss did not fall by 2:"; echo "$out"; exit 1; }
[ "$(wc -l < "$tmp/metrics.jsonl")" -eq 40 ]
"$bin" plot "$tmp/metrics.jsonl" >/dev/null
grep -q "<polyline" "$tmp/metrics.svg"
