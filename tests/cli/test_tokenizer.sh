#!/usr/bin/env bash
# slapo.tokenizer: GPT-2's byte-level BPE in C++ gives the ids of the npm reference implementation
# (gpt-3-encoder's JavaScript, run by the machine's Node.js) exactly, on a mixed corpus (code, CJK,
# emoji, accents, digits of other scripts, Unicode spaces and whitespace runs, a special token's
# text) and on three State of the Union addresses; decode gives the text back.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/cli/lib.sh"
data="${SLAPO_DATA_DIR:-$root/data}"
[ -f "$data/gpt-3-encoder/Encoder.js" ] || { echo "skip: no $data/gpt-3-encoder (scripts/fetch-data fetches it)"; exit 77; }
need_node
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '%b' "I don't think it's THEY'RE, we'll see; she'd've gone.\n" \
  "def f(x):\n\treturn x**2  # squares\n\n\n    if a != b: {}\n" \
  "日本語のテキスト、中文句子。한국어 문장입니다.\n" \
  "emoji 🙂👍🏽 family 👨‍👩‍👧 flags 🇩🇪\n" \
  "a   b\t\t c\n\n\n  d   \n" \
  "café naïve Ångström Ελληνικά русский\n" \
  "123 4,567.89 ٣٤٥ ½ ² x²\n" \
  "nbsp\xc2\xa0here ideographic\xe3\x80\x80space thin\xe2\x80\x89space bom\xef\xbb\xbfmark\n" \
  "<|endoftext|>The end.   " > "$tmp/mixed.txt"
addresses=("$data"/sotu/*.txt)
cat "${addresses[@]:0:3}" > "$tmp/sotu.txt"

cat > "$tmp/reference.js" <<'JS'
const fs = require('fs');
const { encode } = require(process.argv[2]);
console.log(JSON.stringify(encode(fs.readFileSync(process.argv[3], 'utf8'))));
JS
cat > "$tmp/ours.lua" <<'LUA'
local tok = slapo.tokenizer(arg[1])
local text = require("slapo.util").read_file(arg[2])
local ids = tok:encode(text)
assert(tok:decode(ids) == text, "decode(encode(text)) is not the text")
assert(tok.vocab_size == 50257 and tok.eos_id == 50256 and tok.bos_id == 50256,
  ("vocab_size %s, eos_id %s"):format(tok.vocab_size, tok.eos_id))
print(slapo.json_encode(ids))
LUA

for corpus in mixed sotu; do
  node "$tmp/reference.js" "$data/gpt-3-encoder" "$tmp/$corpus.txt" > "$tmp/$corpus.reference.json"
  "$bin" run "$tmp/ours.lua" "$data/gpt2-bpe" "$tmp/$corpus.txt" > "$tmp/$corpus.ours.json"
  same_token_ids "$tmp/$corpus.reference.json" "$tmp/$corpus.ours.json" "$corpus"
done

# bad input names what is wrong
cat > "$tmp/bad.lua" <<'LUA'
local _, missing = pcall(slapo.tokenizer, arg[1] .. "/nowhere")
print(missing)
local tok = slapo.tokenizer(arg[1])
local _, outside = pcall(tok.decode, tok, { 1, 50257 })
print(outside)
local _, field = pcall(function() return tok.vocab end)
print(field)
LUA
"$bin" run "$tmp/bad.lua" "$data/gpt2-bpe" > "$tmp/bad.out"
grep -q "tokenizer: .*/nowhere does not exist; give a tokenizer.json or tokenizer.model, or the directory of a checkpoint that holds one" "$tmp/bad.out"
grep -q "tokenizer: id 50257 is outside the vocabulary (0 .. 50256)" "$tmp/bad.out"
grep -q "tokenizer: no field 'vocab' (fields: vocab_size, bos_id, eos_id; methods: encode, decode)" "$tmp/bad.out" \
  || { cat "$tmp/bad.out"; exit 1; }
echo "tokenizer ok"
