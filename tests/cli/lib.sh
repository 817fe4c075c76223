# Helpers for the tests/cli scripts (sourced). Under `set -e` a check written `cond && check` is
# skipped, not failed, when cond is false: these fail loudly instead.

# expect_code WANT GOT [CONTEXT]: the exit code was WANT
expect_code() {
  if [ "$2" -ne "$1" ]; then
    echo "expected exit code $1, got $2${3:+ ($3)}"
    exit 1
  fi
}

# same_token_ids REFERENCE.json OURS.json LABEL: two JSON arrays of token ids are equal, or the first
# difference is shown
same_token_ids() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
ref, ours = json.load(open(sys.argv[1])), [int(i) for i in json.load(open(sys.argv[2]))]
if ref != ours:
    at = next((i for i, (a, b) in enumerate(zip(ref, ours)) if a != b), min(len(ref), len(ours)))
    print(f"{sys.argv[3]}: ids differ from the reference's at {at} of {len(ref)} (ours {len(ours)}): "
          f"reference {ref[max(0, at - 3):at + 5]}, ours {ours[max(0, at - 3):at + 5]}")
    sys.exit(1)
print(f"{sys.argv[3]}: {len(ours)} ids equal to the reference's")
PY
}

# mixed_corpus FILE SPECIALS: a text that tokenizers get wrong first (contractions, code with tabs and
# CRLF, CJK, emoji with modifiers and joiners, accents, ligatures, other scripts' digits, Unicode
# spaces, whitespace runs), then SPECIALS: a model's special tokens written inside the text
mixed_corpus() {
  printf '%b' "I don't think it's THEY'RE, we'll see; she'd've gone. DON'T SHOUT\n" \
    "def f(x):\n\treturn x**2  # squares\n\n\n    if a != b: {}\r\n" \
    "日本語のテキスト、中文句子。한국어 문장입니다.\n" \
    "emoji 🙂👍🏽 family 👨‍👩‍👧 flags 🇩🇪\n" \
    "a   b\t\t c\n\n\n  d   \n" \
    "café naïve Ångström Ελληνικά русский 12345678 ٣٤٥٦ ½ ² x² ﬁ ①\n" \
    "nbsp\xc2\xa0here ideographic\xe3\x80\x80space thin\xe2\x80\x89space bom\xef\xbb\xbfmark nel\xc2\x85x\n" \
    "$2" > "$1"
}

# need_data PATH...: skip the test (exit 77) unless each path is in the data directory ($data)
need_data() {
  for need in "$@"; do
    [ -e "$data/$need" ] || { echo "skip: no $data/$need (scripts/fetch-data fetches it)"; exit 77; }
  done
}

# need_node: skip the test (exit 77) without Node.js, which runs the reference implementations
need_node() {
  command -v node >/dev/null || { echo "skip: no Node.js to run the reference implementation"; exit 77; }
}

# first_addresses N OUT: the first N State of the Union addresses of $data/sotu, one after another, in OUT
first_addresses() {
  local addresses=("$data"/sotu/*.txt)
  cat "${addresses[@]:0:$1}" > "$2"
}

# same_as_rust TOKENIZER.json TEXT LABEL: slapo.tokenizer ($bin) gives the ids and decoded text of Hugging
# Face's tokenizers in Rust ($data/hf-tokenizers-rs: npm @anush008/tokenizers) for TEXT, or the first
# difference is shown. Works in $tmp.
same_as_rust() {
  cat > "$tmp/rust_reference.js" <<'JS'
const [pkg, tokenizer, file] = process.argv.slice(2);
const { Tokenizer } = require(pkg + '/node_modules/@anush008/tokenizers');
const fs = require('fs');
(async () => {
  const tok = Tokenizer.fromFile(tokenizer);
  const ids = (await tok.encode(fs.readFileSync(file, 'utf8'))).getIds();
  console.log(JSON.stringify({ ids, text: await tok.decode(ids, false) }));
})();
JS
  node "$tmp/rust_reference.js" "$data/hf-tokenizers-rs" "$1" "$2" > "$tmp/rust.json"
  "$bin" run <(cat <<'LUA'
local tok = slapo.tokenizer(arg[1])
local ids = tok:encode(require("slapo.util").read_file(arg[2]))
print(slapo.json_encode({ ids = ids, text = tok:decode(ids) }))
LUA
) "$1" "$2" > "$tmp/ours.json"
  python3 - "$tmp/rust.json" "$tmp/ours.json" "$tmp/ids" "$3" <<'PY'
import json, sys
ref, ours = (json.load(open(p)) for p in sys.argv[1:3])
json.dump(ref["ids"], open(sys.argv[3] + ".ref", "w")); json.dump(ours["ids"], open(sys.argv[3] + ".ours", "w"))
if ref["text"] != ours["text"]:
    at = next((i for i, (a, b) in enumerate(zip(ref["text"], ours["text"])) if a != b), 0)
    sys.exit(f"{sys.argv[4]}: decode differs at {at}: reference {ref['text'][at-20:at+20]!r}, ours {ours['text'][at-20:at+20]!r}")
PY
  same_token_ids "$tmp/ids.ref" "$tmp/ids.ours" "$3"
}

# same_pair_as_rust TOKENIZER.json FIRST SECOND LABEL: slapo.tokenizer's encode of the pair of texts in
# files FIRST and SECOND (ids and type ids, the post-processor's pair template) equal to Hugging Face's
# tokenizers in Rust. Works in $tmp.
same_pair_as_rust() {
  cat > "$tmp/rust_pair.js" <<'JS'
const [pkg, tokenizer, first, second] = process.argv.slice(2);
const { Tokenizer } = require(pkg + '/node_modules/@anush008/tokenizers');
const fs = require('fs');
(async () => {
  const tok = Tokenizer.fromFile(tokenizer);
  const enc = await tok.encode(fs.readFileSync(first, 'utf8'), fs.readFileSync(second, 'utf8'));
  console.log(JSON.stringify({ ids: enc.getIds(), type_ids: enc.getTypeIds() }));
})();
JS
  node "$tmp/rust_pair.js" "$data/hf-tokenizers-rs" "$1" "$2" "$3" > "$tmp/rust_pair.json"
  "$bin" run <(cat <<'LUA'
local util = require("slapo.util")
local ids, type_ids = slapo.tokenizer(arg[1]):encode(util.read_file(arg[2]), util.read_file(arg[3]))
print(slapo.json_encode({ ids = ids, type_ids = type_ids }))
LUA
) "$1" "$2" "$3" > "$tmp/ours_pair.json"
  python3 - "$tmp/rust_pair.json" "$tmp/ours_pair.json" "$4" <<'PY'
import json, sys
ref, ours = (json.load(open(p)) for p in sys.argv[1:3])
for key in ("ids", "type_ids"):
    if ref[key] != ours[key]:
        at = next((i for i, (a, b) in enumerate(zip(ref[key], ours[key])) if a != b), min(len(ref[key]), len(ours[key])))
        sys.exit(f"{sys.argv[3]}: {key} differ at {at} of {len(ref[key])}: reference {ref[key][at:at+8]}, ours {ours[key][at:at+8]}")
print(f"{sys.argv[3]}: a pair's {len(ref['ids'])} ids and type ids equal to the reference's")
PY
}

# need_utf8proc TOKENIZER: skip the test (exit 77) when this build ($bin) has no utf8proc to read it
need_utf8proc() {
  if "$bin" run <(echo 'slapo.tokenizer(arg[1])') "$1" 2>&1 | grep -q "no utf8proc"; then
    echo "skip: this build has no utf8proc"
    exit 77
  fi
}

# refused_by_name DIR WANT...: slapo.tokenizer refuses each DIR/<name>, <name> the WANT up to its first / or space, and
# its error holds that WANT (the name, the file, what is not read)
refused_by_name() {
  local dir="$1" want name
  shift
  for want in "$@"; do
    name="${want%%[/ ]*}"
    if "$bin" run <(echo 'slapo.tokenizer(arg[1])') "$dir/$name" > "$tmp/refusal.out" 2>&1; then
      echo "$name was read"; exit 1
    fi
    grep -qF "$want" "$tmp/refusal.out" || { echo "expected: $want"; cat "$tmp/refusal.out"; exit 1; }
  done
}
