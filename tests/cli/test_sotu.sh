#!/usr/bin/env bash
# Small GPT-2, GPT-Neo and OPT models on real text: the loss falls clearly, metrics.jsonl is written
# and plots to SVG; RoBERTa, ALBERT and BERT as masked language models (ALBERT with its SentencePiece
# tokenizer, BERT with its WordPiece tokenizer.json) and T5 with span corruption: their loss over the hidden tokens, noisier, falls clearly on
# average over the last ten steps. The examples take their options with hyphens or underscores alike.
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
for example in roberta_sotu albert_sotu t5_sotu bert_sotu; do
  [ "$example" = roberta_sotu ] || [ -f "${SLAPO_DATA_DIR:-data}/albert-tokenizer/spiece.model" ] ||
    { echo "$example: no data/albert-tokenizer (scripts/fetch-data)"; exit 1; }
  [ "$example" != bert_sotu ] || [ -f "${SLAPO_DATA_DIR:-data}/bert-tokenizer/tokenizer.json" ] ||
    { echo "$example: no data/bert-tokenizer (scripts/fetch-data)"; exit 1; }
  out=$("$bin" run "examples/$example.lua" --steps 40 --texts 3 --seq 32 --batch 4 --hidden 64 --layers 2 \
    --lr 3e-3 --warmup 5 --log-every 10 --metrics "$tmp/$example.jsonl")
  echo "$example: $(echo "$out" | tail -1)"
  /usr/bin/python3 - "$tmp/$example.jsonl" <<'PY' || { echo "$example: the masked loss did not fall by 1.5:"; echo "$out"; exit 1; }
import json, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1])]
assert len(losses) == 40, len(losses)
last = sum(losses[-10:]) / 10
print(f"  first {losses[0]:.3f}, mean of the last 10 steps {last:.3f}")
sys.exit(0 if last < losses[0] - 1.5 else 1)
PY
done
# Mixtral with LLaMA-2's tokenizer, on one rank and with its experts over 2 (--ep 2): the loss falls
[ -f "${SLAPO_DATA_DIR:-data}/llama2-tokenizer/tokenizer.model" ] ||
  { echo "mixtral_sotu: no data/llama2-tokenizer (scripts/fetch-data)"; exit 1; }
for launch in "run" "run --nproc 2"; do
  extra=""; [ "$launch" = "run" ] || extra="--ep 2"
  out=$("$bin" $launch examples/mixtral_sotu.lua $extra --steps 40 --texts 3 --seq 32 --batch 4 --hidden 64 \
    --layers 2 --lr 3e-3 --warmup 5 --log-every 10 --metrics "$tmp/mixtral_sotu.jsonl")
  echo "mixtral_sotu ($launch $extra): $(echo "$out" | tail -1)"
  echo "$out" | grep -q "Mixtral: .* parameters" || { echo "$out"; exit 1; }
  echo "$out" | awk '/^loss/ { exit !($4 < $2 - 1.5) }' || { echo "mixtral_sotu: loss did not fall by 1.5:"; echo "$out"; exit 1; }
done
"$bin" plot "$tmp/gpt2_sotu.jsonl" >/dev/null
grep -q "<polyline" "$tmp/gpt2_sotu.svg"
# an option that is not one names the valid ones
if out=$("$bin" run examples/opt_sotu.lua --log-evry 10 2>&1); then echo "a misspelt option ran"; exit 1; fi
echo "$out" | grep -q "unknown option '--log-evry' (options: .*--log_every" || { echo "$out"; exit 1; }
