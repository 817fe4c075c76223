#!/usr/bin/env bash
# Small GPT-2, GPT-Neo and OPT models on real text: the loss falls clearly, metrics.jsonl is written
# and plots to SVG. The examples take their options with hyphens or underscores alike.
set -euo pipefail
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for example in gpt2_sotu gpt_neo_sotu opt_sotu; do
  out=$("$bin" run "examples/$example.lua" --steps 40 --texts 3 --seq 32 --batch 4 --hidden 64 --layers 2 \
    --lr 3e-3 --warmup 5 --log-every 10 --metrics "$tmp/$example.jsonl")
  echo "$example: $(echo "$out" | tail -1)"
  echo "$out" | awk '/^loss/ { exit !($4 < $2 - 2.0) }' || { echo "$example: loss did not fall by 2:"; echo "$out"; exit 1; }
  [ "$(wc -l < "$tmp/$example.jsonl")" -eq 40 ]
done
"$bin" plot "$tmp/gpt2_sotu.jsonl" >/dev/null
grep -q "<polyline" "$tmp/gpt2_sotu.svg"
# an option that is not one names the valid ones
if out=$("$bin" run examples/opt_sotu.lua --log-evry 10 2>&1); then echo "a misspelt option ran"; exit 1; fi
echo "$out" | grep -q "unknown option '--log-evry' (options: .*--log_every" || { echo "$out"; exit 1; }
