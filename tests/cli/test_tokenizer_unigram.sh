#!/usr/bin/env bash
# slapo.tokenizer on a Unigram tokenizer.json: ALBERT's real SentencePiece unigram model (its pieces and
# scores) as transformers' converter lays it out (data/albert-unigram-json, scripts/fetch-data), ids and
# decoded text equal to Hugging Face's tokenizers in Rust on the mixed corpus (with ALBERT's special
# tokens and characters no piece covers, whose runs become one unknown token) and three addresses; the
# same with byte fallback (the pieces' file given <0xXX> pieces: uncovered characters become bytes);
# what is not read is refused by name. The normalizer carries the model's own SentencePiece character map
# (Precompiled) and a Replace by regex; a T5-style layout (the map first, nothing before it) and a text of
# what the map rewrites (fullwidth forms, ligatures, compatibility characters, clusters that start with a
# rewritten character, CR LF, controls, zero-width characters) check the map alone.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/cli/lib.sh"
data="${SLAPO_DATA_DIR:-$root/data}"
need_data albert-unigram-json/tokenizer.json hf-tokenizers-rs/node_modules/@anush008/tokenizers/index.js sotu
need_node
need_utf8proc "$data/albert-unigram-json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mixed_corpus "$tmp/mixed.txt" "[CLS] who [MASK] the \`\`quoted'' [SEP]x<pad> 你好 🙂🙂 tail\n"
first_addresses 3 "$tmp/sotu.txt"
printf '%b' "ＡＢＣ ｆｕｌｌ\u3000ｗｉｄｔｈ Ａ\u0301 Ｅ\u0308\u0301 e\u0301 ﬁ ﬀ ㍿ ㈱ ① ⑴ ¼ ᴬ x\u00b2 \u2126 \u212b\n" \
  "nb\u00a0sp zero\u200bwidth j\u200doin bom\ufeffmark tab\there crlf\r\nnext cr\rlf \x01\x07ctrl\x7f del\n" \
  "ｶﾀｶﾅ ｶﾞｷﾞ 가\u1100\u1161 각 क्षि नमस्ते 👩🏽‍💻 🏳️‍🌈 1️⃣ #️⃣ \u0130stanbul ǅ ß ΣΑΣ \u0301alone\n" \
  "many    spaces\u3000\u3000and  two ``quotes'' ‘single’ “double” … — – ﹏ ﹖ ！ ？ ～\n" > "$tmp/charsmap.txt"
python3 - "$data/albert-unigram-json/tokenizer.json" "$tmp" <<'PY'
import json, os, sys
t = json.load(open(sys.argv[1]))
def write(name, change):
    u = json.loads(json.dumps(t)); change(u)
    os.makedirs(f"{sys.argv[2]}/{name}", exist_ok=True)
    json.dump(u, open(f"{sys.argv[2]}/{name}/tokenizer.json", "w"))
def bytes_too(u):
    u["model"]["vocab"] += [[f"<0x{b:02X}>", -20.0] for b in range(256)]
    u["model"]["byte_fallback"] = True
write("byte_fallback", bytes_too)
def t5_layout(u):  # transformers' SpmConverter: the map, runs of spaces as one, Metaspace alone
    u["normalizer"]["normalizers"] = u["normalizer"]["normalizers"][-2:]
    u["pre_tokenizer"] = u["pre_tokenizer"]["pretokenizers"][1]
write("t5_layout", t5_layout)
write("bad_charsmap", lambda u: u["normalizer"]["normalizers"][5].update(precompiled_charsmap="AAAA"))
write("bad_unk", lambda u: u["model"].update(unk_id=40000))
write("no_unk", lambda u: u["model"].update(unk_id=None))
write("bad_piece", lambda u: u["model"]["vocab"].__setitem__(7, ["x", "high"]))
PY

for corpus in mixed sotu; do same_as_rust "$data/albert-unigram-json/tokenizer.json" "$tmp/$corpus.txt" "albert $corpus"; done
same_as_rust "$tmp/byte_fallback/tokenizer.json" "$tmp/mixed.txt" "albert with byte fallback"
for corpus in charsmap mixed; do same_as_rust "$tmp/t5_layout/tokenizer.json" "$tmp/$corpus.txt" "charsmap alone $corpus"; done
same_as_rust "$data/albert-unigram-json/tokenizer.json" "$tmp/charsmap.txt" "albert charsmap"
# a pair by ALBERT's template: [CLS] first [SEP] second [SEP], the second part of type 1
same_pair_as_rust "$data/albert-unigram-json/tokenizer.json" "$tmp/mixed.txt" "$tmp/charsmap.txt" "albert pair"
# [CLS], "▁", the character's three bytes, [SEP]: no unknown token (1)
"$bin" run <(echo 'local ids = slapo.tokenizer(arg[1]):encode("你"); assert(#ids == 6 and ids[3] ~= 1 and ids[4] ~= 1 and
  ids[5] ~= 1, slapo.json_encode(ids))') "$tmp/byte_fallback"
# without an unk_id, a character no piece covers is refused naming the file (it reads fine)
if "$bin" run <(echo 'slapo.tokenizer(arg[1]):encode("你")') "$tmp/no_unk" > "$tmp/no_unk.out" 2>&1; then
  echo "no_unk: encoded a character no piece covers"; exit 1
fi
grep -qF "no_unk/tokenizer.json: Unigram has no unk_id, and no piece covers '你'" "$tmp/no_unk.out" ||
  { cat "$tmp/no_unk.out"; exit 1; }
refused_by_name "$tmp" "bad_unk/tokenizer.json: Unigram unk_id 40000 is not a piece of its 30000 (0 .. 29999)" \
  "bad_piece/tokenizer.json: Unigram piece 7 is not [piece, score]" \
  "bad_charsmap/tokenizer.json: Precompiled's precompiled_charsmap is not SentencePiece's character map (3 bytes"
echo "Unigram tokenizer.json ok"
