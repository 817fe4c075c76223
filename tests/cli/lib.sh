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
