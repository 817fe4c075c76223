#!/usr/bin/env bash
# A clone is the whole product: nothing the program, its scripts, tests, benchmarks or examples read
# may live outside the repository (the team's reference shelf beside the checkout included).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
outside='\.\./'"shared"   # spelled in two parts so this file does not name it itself
if hits=$(grep -rnIE "$outside" src stdlib tests scripts bench examples cmake CMakeLists.txt .ci); then
  echo "these lines read files outside the repository:"
  echo "$hits"
  exit 1
fi
# what used to come from there is here
[ -f stdlib/devices/h100.json ]
for d in bert-tiny gpt2-tiny gpt2-variants llama-tiny llama3-rope-scaling mistral-tiny qwen2-tiny gpt-neo-tiny opt-tiny \
  roberta-tiny albert-tiny t5-tiny mixtral-tiny; do
  [ -f "tests/fixtures/hf/$d/expected.safetensors" ] || { echo "missing fixture tests/fixtures/hf/$d"; exit 1; }
done
echo "the repository names nothing outside itself"
