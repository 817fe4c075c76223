#!/usr/bin/env bash
# Fuzzes the loaders users hand files to (tests/fuzz): the safetensors reader and config.json
# handling, built with clang's libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, each run
# for SLAPO_FUZZ_SECONDS (default 30) from a seed corpus of files slapo-lua writes. Any crash,
# sanitizer report or input slower than 5 s fails the test and leaves the input in the log.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="$(cd "$(dirname "$bin")" && pwd)/fuzz"
seconds="${SLAPO_FUZZ_SECONDS:-30}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$build_dir/build.ninja" ]; then
  CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
cmake --build "$build_dir" -j "${SLAPO_JOBS:-2}" >"$tmp/build.log" 2>&1 || { echo "the fuzz targets do not build:"; tail -30 "$tmp/build.log"; exit 1; }

# Seeds: checkpoints and configs of every model type, as slapo-lua writes them.
mkdir -p "$tmp/st" "$tmp/config"
cat > "$tmp/seeds.lua" <<'LUA'
local out = arg[1]
local small = {
  gpt2 = { n_embd = 8, n_head = 2, n_layer = 1, vocab_size = 16, n_positions = 8 },
  bert = { hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 16, vocab_size = 16,
    max_position_embeddings = 8 },
  llama = { hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 16, vocab_size = 16,
    rope_scaling = { rope_type = "llama3", factor = 8, original_max_position_embeddings = 16 } },
  qwen2 = { hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 16, vocab_size = 16,
    num_key_value_heads = 1, use_sliding_window = true, sliding_window = 4, max_window_layers = 0 },
  mistral = { hidden_size = 8, num_hidden_layers = 1, num_attention_heads = 2, num_key_value_heads = 2,
    intermediate_size = 16, vocab_size = 16 },
}
for kind, cfg in pairs(small) do
  local model = slapo.models[kind](cfg)
  if kind == "llama" then model = model:to("bfloat16") end
  slapo.save(model, out .. "/" .. kind)
end
LUA
"$bin" run "$tmp/seeds.lua" "$tmp/models" >/dev/null
for d in "$tmp"/models/*/; do
  name=$(basename "$d")
  cp "$d/model.safetensors" "$tmp/st/$name.safetensors"
  cp "$d/config.json" "$tmp/config/$name.json"
done
for f in "$root"/tests/fixtures/hf/*/config.json; do
  cp "$f" "$tmp/config/hf-$(basename "$(dirname "$f")").json"
done

run() {  # target corpus
  if ! (cd "$tmp" && "$build_dir/$1" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=4096 -max_len=65536 \
          -print_final_stats=1 "$2" >"$tmp/$1.log" 2>&1); then
    echo "$1 found a failing input:"
    tail -40 "$tmp/$1.log"
    exit 1
  fi
  grep -o 'stat::number_of_executed_units: [0-9]*' "$tmp/$1.log" | awk '{print $2}'
}
st=$(run fuzz_safetensors "$tmp/st")
config=$(run fuzz_config "$tmp/config")
echo "fuzzed ${seconds}s each: safetensors $st inputs, config.json $config inputs, no failure"
