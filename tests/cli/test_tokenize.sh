#!/usr/bin/env bash
# slapo-lua tokenize writes one token file from text and JSON-lines files (LLaMA-3's tokenizer.json):
# each document's ids are the tokenizer's, ending with its end-of-text token; slapo.token_file maps
# it and packs fixed-length batches whose rank parts make the same global batch for 1, 2 and 4 ranks,
# a shuffled epoch visiting every sample once. Bad lines, missing fields and cut files are named.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$root/tests/cli/lib.sh"
data="${SLAPO_DATA_DIR:-$root/data}"
tokenizer="$data/llama3-tokenizer"
for need in "$tokenizer/tokenizer.json" "$data/sotu"; do
  [ -e "$need" ] || { echo "skip: no $need (scripts/fetch-data fetches it)"; exit 77; }
done
if "$bin" run <(echo 'slapo.tokenizer(arg[1])') "$tokenizer" 2>&1 | grep -q "no PCRE2"; then
  echo "skip: this build has no PCRE2"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '%s\n' '{"text": "First document: caf\u00e9, \u65e5\u672c\u8a9e, code x**2.", "id": 1}' '' \
  '{"id": 2, "text": "Second <|eot_id|> with a special token inside."}' > "$tmp/corpus.jsonl"
addresses=("$data"/sotu/*.txt)
cp "${addresses[0]}" "$tmp/address.txt"
"$bin" tokenize --tokenizer "$tokenizer" --out "$tmp/tokens.bin" "$tmp/corpus.jsonl" "$tmp/address.txt" \
  >"$tmp/out" 2>"$tmp/progress"
grep -q "^wrote $tmp/tokens.bin: [0-9]* tokens in 3 documents (vocabulary 128256)$" "$tmp/out" || { cat "$tmp/out"; exit 1; }
grep -q "^tokenize: .* MB/s, 3 documents, in [0-9.]* s$" "$tmp/progress" || { cat "$tmp/progress"; exit 1; }
"$bin" tokenize --no-eos --tokenizer "$tokenizer/tokenizer.json" --out "$tmp/plain.bin" "$tmp/corpus.jsonl" \
  >/dev/null 2>&1

cat > "$tmp/check.lua" <<'LUA'
local dir, tokens, plain, corpus, address = unpack(arg)
local util = require("slapo.util")
local tok = slapo.tokenizer(dir)
local f = slapo.token_file(tokens)
assert(f.documents == 3 and f.vocab_size == 128256, ("%d documents, vocabulary %d"):format(f.documents, f.vocab_size))
-- each document: the tokenizer's ids, then <|end_of_text|>
local texts = { "First document: café, 日本語, code x**2.", "Second <|eot_id|> with a special token inside.",
  util.read_file(address) }
local count = 0
for i, text in ipairs(texts) do
  local ids = tok:encode(text)
  ids[#ids + 1] = tok.eos_id
  assert(util.same_array(f:document(i):tolist(), ids), "document " .. i .. " is not the tokenizer's ids")
  count = count + #ids
end
assert(f.tokens == count, ("%d tokens, the documents hold %d"):format(f.tokens, count))
local p = slapo.token_file(plain)
assert(p.documents == 2 and util.same_array(p:document(2):tolist(), tok:encode(texts[2])), "--no-eos")
-- samples of 32 tokens packed in order; each rank's part of a step, joined, is the one-rank batch
local seq, batch = 32, 8
local first = f:batch{ step = 1, batch = batch, seq = seq }
local all = {}
for i = 1, f.documents do
  for _, id in ipairs(f:document(i):tolist()) do all[#all + 1] = id end
end
for row = 0, batch - 1 do
  local want = {}
  for k = 1, seq do want[k] = all[row * seq + k] end
  assert(util.same_array(first:narrow(0, row, 1):reshape({ -1 }):tolist(), want), "sample " .. row .. " is not the corpus in order")
end
for _, seed in ipairs({ 0, 5 }) do
  for step = 1, 3 do
    local whole = f:batch{ step = step, batch = batch, seq = seq, seed = seed }
    for _, ranks in ipairs({ 2, 4 }) do
      local parts = {}
      for rank = 0, ranks - 1 do
        parts[#parts + 1] = f:batch{ step = step, batch = batch, seq = seq, rank = rank, ranks = ranks, seed = seed }
      end
      assert(slapo.cat(parts, 0):equal(whole), ("step %d, seed %d: %d ranks' parts are not the batch"):format(step,
        seed, ranks))
    end
  end
end
-- a shuffled epoch (one row a step) visits every sample once, in another order than the file's
local samples = math.floor(f.tokens / seq)
local shuffled, ordered = {}, {}
for step = 1, samples do
  shuffled[step] = table.concat(f:batch{ step = step, batch = 1, seq = seq, seed = 5 }:reshape({ -1 }):tolist(), ",")
  ordered[step] = table.concat(f:batch{ step = step, batch = 1, seq = seq }:reshape({ -1 }):tolist(), ",")
end
local moved = not util.same_array(shuffled, ordered)
table.sort(shuffled)
table.sort(ordered)
assert(moved and util.same_array(shuffled, ordered), "a shuffled epoch is not the file's samples in another order")
-- the next epoch is shuffled anew
local again = table.concat(f:batch{ step = samples + 1, batch = samples, seq = seq, seed = 5 }:reshape({ -1 }):tolist(), ",")
assert(again ~= table.concat(f:batch{ step = 1, batch = samples, seq = seq, seed = 5 }:reshape({ -1 }):tolist(), ","),
  "the second epoch repeats the first's order")
-- positions: 0 at each row's start and where a document starts in it, else one more than before
local starts = {}
local at = 0
for i = 1, f.documents do
  starts[at] = true
  at = at + f:document(i):numel()
end
local ids, positions = f:batch{ step = 1, batch = samples, seq = seq, seed = 5, positions = true }
assert(ids:equal(f:batch{ step = 1, batch = samples, seq = seq, seed = 5 }), "positions = true changed the rows")
local inside = 0  -- documents that start inside a row
for row = 0, samples - 1 do
  local row_ids, row_pos = ids:narrow(0, row, 1):reshape({ -1 }):tolist(), positions:narrow(0, row, 1):reshape({ -1 }):tolist()
  -- which sample this row is: the one whose tokens it holds
  local sample
  for k = 0, samples - 1 do
    local same = true
    for t = 1, seq do same = same and all[k * seq + t] == row_ids[t] end
    if same then sample = k break end
  end
  assert(sample, "row " .. row .. " is no sample of the file")
  for t = 1, seq do
    local want = (t == 1 or starts[sample * seq + t - 1]) and 0 or row_pos[t - 1] + 1
    assert(row_pos[t] == want, ("row %d token %d: position %d, want %d"):format(row, t, row_pos[t], want))
    if t > 1 and row_pos[t] == 0 then inside = inside + 1 end
  end
end
assert(inside > 0, "no document starts inside a row: the check saw nothing")
for _, bad in ipairs({ { step = 0, batch = 8, seq = 32 }, { step = 1, batch = 6, seq = 32, ranks = 4 },
  { step = 1, batch = 8, seq = 32, shuffle = true } }) do
  print((select(2, pcall(f.batch, f, bad))))
end
LUA
"$bin" run "$tmp/check.lua" "$tokenizer" "$tmp/tokens.bin" "$tmp/plain.bin" "$tmp/corpus.jsonl" "$tmp/address.txt" \
  >"$tmp/check.out" 2>&1 || { cat "$tmp/check.out"; exit 1; }
grep -q "token_file:batch: step must be" "$tmp/check.out" || grep -q "token_file:batch: .*step" "$tmp/check.out" \
  || { echo "step 0 was not refused:"; cat "$tmp/check.out"; exit 1; }
grep -qF "token_file: a batch of 6 rows does not split over 4 ranks" "$tmp/check.out" || { cat "$tmp/check.out"; exit 1; }
grep -qF "unknown option 'shuffle'" "$tmp/check.out" || { cat "$tmp/check.out"; exit 1; }

# slapo.train{data = {tokens = ...}}: a tiny LLaMA of the tokenizer's vocabulary trains on the file; on
# 2 data-parallel ranks each takes half of the global batch, so the losses are the one-rank run's;
# resumed from a step-2 checkpoint with a shuffling seed, steps 3-4 see the same batches (equal losses)
cat > "$tmp/train.lua" <<'LUA'
local tokens, dir, resume, seed = arg[1], arg[2], arg[3], tonumber(arg[4]) or 3
local layout = require("slapo.parallel").layout({ tp = 1 })
slapo.manual_seed(0)
local model = slapo.models.llama({ hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
  num_attention_heads = 2, num_key_value_heads = 2, vocab_size = 128256, max_position_embeddings = 64 })
local result = slapo.train({ model = model, layout = layout, steps = 4, lr = 1e-2, quiet = true, grad_accum = 2,
  data = { tokens = tokens, batch = 4, seq = 32, seed = seed }, checkpoint_dir = dir, checkpoint_every = 2,
  resume = resume or false })
if slapo.dist.rank() == 0 then
  for step = result.first_step, 4 do print(("loss %d %.6f"):format(step, result.losses[step])) end
end
LUA
"$bin" run "$tmp/train.lua" "$tmp/tokens.bin" "$tmp/one" > "$tmp/one.out" 2>&1 || { cat "$tmp/one.out"; exit 1; }
"$bin" run --nproc 2 "$tmp/train.lua" "$tmp/tokens.bin" "$tmp/two" > "$tmp/two.out" 2>&1 || { cat "$tmp/two.out"; exit 1; }
"$bin" run "$tmp/train.lua" "$tmp/tokens.bin" "$tmp/again" "$tmp/one/step-000002" > "$tmp/resumed.out" 2>&1 \
  || { cat "$tmp/resumed.out"; exit 1; }
python3 - "$tmp/one.out" "$tmp/two.out" "$tmp/resumed.out" <<'PY'
import re, sys
def losses(path):
    return {int(s): float(v) for s, v in re.findall(r"^loss (\d+) (\S+)$", open(path).read(), re.M)}
one, two, resumed = (losses(p) for p in sys.argv[1:])
assert sorted(one) == [1, 2, 3, 4] and sorted(two) == [1, 2, 3, 4], (one, two)
for step in one:
    assert abs(one[step] - two[step]) < 1e-5 * one[step], f"step {step}: one rank {one[step]}, two ranks {two[step]}"
assert sorted(resumed) == [3, 4], resumed
for step in resumed:
    assert resumed[step] == one[step], f"step {step}: resumed {resumed[step]}, uninterrupted {one[step]}"
PY
# resumed with another shuffling seed: other batches, so refused, naming what differs
"$bin" run "$tmp/train.lua" "$tmp/tokens.bin" "$tmp/other" "$tmp/one/step-000002" 4 > "$tmp/other.out" 2>&1 &&
  { echo "a resume with another seed was not refused"; exit 1; }
grep -qF "was trained on other data, so resuming would not see the batches that run saw (seed 3, now 4)" \
  "$tmp/other.out" || { cat "$tmp/other.out"; exit 1; }
# documents = "separate": each document attends only within itself; it trains, on other losses than
# documents run together, and an unknown choice is refused
cat > "$tmp/separate.lua" <<'LUA'
slapo.manual_seed(0)
local model = slapo.models.llama({ hidden_size = 16, intermediate_size = 32, num_hidden_layers = 1,
  num_attention_heads = 2, num_key_value_heads = 2, vocab_size = 128256, max_position_embeddings = 64 })
local result = slapo.train({ model = model, steps = 2, lr = 1e-2, quiet = true,
  data = { tokens = arg[1], batch = 4, seq = 32, documents = arg[2] } })  -- file order: documents start in step 1's rows
print(("loss %.6f"):format(result.losses[2]))
LUA
"$bin" run "$tmp/separate.lua" "$tmp/tokens.bin" separate > "$tmp/separate.out" 2>&1 || { cat "$tmp/separate.out"; exit 1; }
"$bin" run "$tmp/separate.lua" "$tmp/tokens.bin" joined > "$tmp/joined.out" 2>&1 || { cat "$tmp/joined.out"; exit 1; }
grep -q "^loss " "$tmp/separate.out" && ! cmp -s "$tmp/separate.out" "$tmp/joined.out" \
  || { echo "documents = separate trained as joined:"; cat "$tmp/separate.out" "$tmp/joined.out"; exit 1; }
"$bin" run "$tmp/separate.lua" "$tmp/tokens.bin" apart > "$tmp/apart.out" 2>&1 && { echo "documents = apart was taken"; exit 1; }
grep -qF 'train: data.documents must be "joined" (documents run into each other in a row, the default) or "separate"' \
  "$tmp/apart.out" || { cat "$tmp/apart.out"; exit 1; }
cat > "$tmp/separate_gpt2.lua" <<'LUA'
local model = slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2, vocab_size = 128256, n_positions = 32 })
print(select(2, pcall(slapo.train, { model = model, steps = 1, quiet = true,
  data = { tokens = arg[1], batch = 2, seq = 8, documents = "separate" } })))
LUA
"$bin" run "$tmp/separate_gpt2.lua" "$tmp/tokens.bin" > "$tmp/separate_gpt2.out" 2>&1
grep -qF 'train: data.documents = "separate" hands the model position_ids, and GPT2LMHeadModel takes none' \
  "$tmp/separate_gpt2.out" || { cat "$tmp/separate_gpt2.out"; exit 1; }

# ids past the model's vocabulary are refused by name
cat > "$tmp/small_vocab.lua" <<'LUA'
local model = slapo.models.gpt2({ n_embd = 16, n_layer = 1, n_head = 2, vocab_size = 64, n_positions = 32 })
print(select(2, pcall(slapo.train, { model = model, steps = 1, quiet = true, data = { tokens = arg[1], batch = 2, seq = 8 } })))
LUA
"$bin" run "$tmp/small_vocab.lua" "$tmp/tokens.bin" > "$tmp/small_vocab.out" 2>&1
grep -qF "train: data.tokens holds ids up to 128255 (its tokenizer's vocabulary), past the model's vocab_size 64" \
  "$tmp/small_vocab.out" || { cat "$tmp/small_vocab.out"; exit 1; }

# bad input: a line that is not JSON, a record without the field, a cut file; nothing half-written stays
printf '{"text": "fine"}\nnot json\n' > "$tmp/bad.jsonl"
printf '{"body": "no text field"}\n' > "$tmp/nofield.jsonl"
set +e
"$bin" tokenize --tokenizer "$tokenizer" --out "$tmp/bad.bin" "$tmp/bad.jsonl" 2>"$tmp/err1"; rc1=$?
"$bin" tokenize --tokenizer "$tokenizer" --out "$tmp/bad.bin" "$tmp/nofield.jsonl" 2>"$tmp/err2"; rc2=$?
set -e
expect_code 1 "$rc1" "a line that is not JSON"
expect_code 1 "$rc2" "a record without the field"
grep -qF "tokenize: $tmp/bad.jsonl:2: the line is not JSON" "$tmp/err1" || { cat "$tmp/err1"; exit 1; }
grep -qF "tokenize: $tmp/nofield.jsonl:1: the record has no string field \"text\" (--field names it)" "$tmp/err2" \
  || { cat "$tmp/err2"; exit 1; }
[ ! -e "$tmp/bad.bin" ] && [ ! -e "$tmp/bad.bin.partial" ] || { echo "a failed tokenize left a file"; exit 1; }
head -c 1000 "$tmp/tokens.bin" > "$tmp/cut.bin"
"$bin" run <(echo 'print(select(2, pcall(slapo.token_file, arg[1])))') "$tmp/cut.bin" > "$tmp/cut.out"
grep -q "token_file: .*cut.bin is truncated or damaged: its header counts [0-9]* tokens in 3 documents ([0-9]* bytes); it ends at byte 1000, inside token 242" \
  "$tmp/cut.out" || { cat "$tmp/cut.out"; exit 1; }
echo "tokenize ok"
