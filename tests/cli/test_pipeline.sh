#!/usr/bin/env bash
# Pipeline parallelism on 4 ranks: TP = 2 x PP = 2 and DP = 2 x PP = 2 follow the loss curves of
# the runs without a pipeline, the TP x PP model saves as the one-rank model's checkpoint and
# verifies against the unscheduled model, and a stage that raises stops every rank with one message.
set -euo pipefail
bin="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small=(--steps 3 --layers 4 --hidden 64 --heads 4 --vocab 512 --seq 16 --batch 8)

losses() { grep -o "^step [0-9]*  loss [0-9.]*" | awk '{print $4}' | tr '\n' ' '; }

same() {  # same <what> <expected> <actual>: losses equal to 1e-4 relative
  python3 - "$@" <<'PY'
import sys
what, a, b = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
if len(a) != len(b) or not a or any(abs(float(x) - float(y)) > 1e-4 * abs(float(x)) for x, y in zip(a, b)):
    sys.exit(f"{what}: expected losses {a}, got {b}")
PY
}

cd "$root/examples"
one=$("$bin" run gpt2_schedule.lua "${small[@]}" --dropout 0 --save "$tmp/one" | losses)
tp_pp=$("$bin" run --nproc 4 gpt2_schedule.lua "${small[@]}" --dropout 0 --tp 2 --pp 2 --save "$tmp/tp_pp" | losses)
same "gpt2 TP=2 x PP=2 (1f1b)" "$one" "$tp_pp"
# the saved TP x PP model is the one-rank model after the same steps. Adam moves each weight by
# about lr = 1e-3 per step, so a stage saved untrained or twice would be ~3e-3 off; summing in
# another order moves near-zero gradients' updates by < 1e-4 (plain TP = 2 too).
cat > "$tmp/compare.lua" <<'LUA'
local a, b = slapo.models.from_pretrained(arg[1]), slapo.models.from_pretrained(arg[2])
local theirs, n = {}, 0
for name, p in b:named_parameters() do theirs[name] = p end
for name, p in a:named_parameters() do
  assert(slapo.allclose(p, theirs[name], { rtol = 0, atol = 3e-4 }), name .. " differs")
  n = n + 1
end
print(n .. " parameters equal")
LUA
"$bin" run "$tmp/compare.lua" "$tmp/one" "$tmp/tp_pp" | grep -q "parameters equal"

# verify of a TP = 2 x PP = 2 schedule: the pipeline's step against the unscheduled model
cat > "$tmp/verify.lua" <<'LUA'
local parallel = require("slapo.parallel")
local layout = parallel.layout({ tp = 2, pp = 2 })
slapo.manual_seed(0)
local model = slapo.models.gpt2({ n_embd = 64, n_layer = 4, n_head = 4, vocab_size = 512, n_positions = 64,
  resid_pdrop = 0, embd_pdrop = 0, attn_pdrop = 0 })
local sch = slapo.create_schedule(model, { group = layout.tp_group })
local report = slapo.verify(sch, { slapo.randint(0, 512, { 4, 16 }) },
  { pipeline = { group = layout.pp_group, micro_batches = 2 } }, function(s)
    require("slapo.schedules.gpt2").schedule(s, {})
    parallel.cut_evenly(s, "transformer.h", 2)
  end)
print(("rank %d: loss and %d gradients verified"):format(layout.rank, report.gradients))
LUA
verified=$("$bin" run --nproc 4 "$tmp/verify.lua" | grep -c "loss and [0-9]* gradients verified")
[ "$verified" -eq 4 ] || { echo "TP x PP verify: $verified of 4 ranks verified"; exit 1; }

dp=$("$bin" run --nproc 2 gpt2_schedule.lua "${small[@]}" --dropout 0 --tp 1 | losses)
dp_pp=$("$bin" run --nproc 4 gpt2_schedule.lua "${small[@]}" --dropout 0 --tp 1 --pp 2 --schedule gpipe | losses)
same "gpt2 DP=2 x PP=2 (gpipe)" "$dp" "$dp_pp"

tp_pp=$("$bin" run --nproc 4 gpt2_schedule.lua "${small[@]}" --dropout 0 --tp 2 --pp 2 --chunks 2 | losses)
same "gpt2 TP=2 x PP=2, 2 chunks per rank (interleaved 1f1b)" "$one" "$tp_pp"

one=$("$bin" run llama_schedule.lua "${small[@]}" --kv_heads 2 | losses)
tp_pp=$("$bin" run --nproc 4 llama_schedule.lua "${small[@]}" --kv_heads 2 --tp 2 --pp 2 --micro 8 | losses)
same "llama TP=2 x PP=2 (1f1b, 8 micro-batches)" "$one" "$tp_pp"

# the last stage's loss raises while the first stage waits for its gradient
cat > "$tmp/raise.lua" <<'LUA'
local layout = require("slapo.parallel").layout({ pp = 2 })
local sch = slapo.create_schedule(slapo.models.gpt2({ n_embd = 32, n_layer = 2, n_head = 2, vocab_size = 64,
  n_positions = 16 }), { group = layout.tp_group })
sch["transformer.h.0"]:cut_pipeline_stage()
local pipe = slapo.build(sch, { pipeline = { group = layout.pp_group, micro_batches = 2,
  loss = function() error("loss exploded") end } })
local ids = slapo.randint(0, 64, { 4, 8 })
pipe:step(ids, { labels = ids })
LUA
start=$(date +%s)
set +e
SLAPO_DIST_TIMEOUT=60 "$bin" run --nproc 2 "$tmp/raise.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
set -e
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] || { echo "a raising stage must fail the run"; exit 1; }
[ "$elapsed" -lt 15 ] || { echo "stopping the ranks took ${elapsed}s"; exit 1; }
[ "$(grep -c 'loss exploded' "$tmp/err")" -eq 1 ] || { echo "failure not shown exactly once:"; cat "$tmp/err"; exit 1; }
grep -q "rank 1 of 2 failed: .*raise.lua:6: loss exploded" "$tmp/err"
echo "pipeline ok"
