#!/usr/bin/env bash
# slapo-lua plan: the table of plans, the plan as a Lua script that trains on the ranks it planned
# for (one stage with knobs, or a pipeline whose stages are spelled out), and clear errors for
# clusters and workloads that cannot work.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" plan gpt2 --cluster 1x2:cpu --batch 4 --seq 32 --steps 2 --out "$tmp/plan.lua" >"$tmp/table"
grep -q "plan for gpt2 (123.5M parameters) on 1 x 2 cpu, batch 4 x seq 32" "$tmp/table"
grep -q "chosen" "$tmp/table"
[ "$(grep -c "slower\|needs" "$tmp/table")" -ge 3 ] || { echo "alternatives missing:"; cat "$tmp/table"; exit 1; }
grep -q '^local plan = {' "$tmp/plan.lua"
"$bin" run --nproc 2 "$tmp/plan.lua" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
grep -q "plan: 2 steps, final loss" "$tmp/out"

# without pipelines (--max-stages 1) the script is one stage; edited, it runs data parallel with ZeRO-1
"$bin" plan gpt2 --cluster 1x2:cpu --batch 4 --seq 32 --steps 2 --max-stages 1 --out "$tmp/plan.lua" >/dev/null
grep -q '^  micro_batches = [0-9]*,' "$tmp/plan.lua"
sed -e 's/^  tp = [0-9]*,/  tp = 1,/' -e 's/^  dp = [0-9]*,/  dp = 2,/' -e 's/^  zero = false,/  zero = true,/' \
  -e 's/^  fully_shard = true,/  fully_shard = false,/' "$tmp/plan.lua" >"$tmp/edited.lua"
"$bin" run --nproc 2 "$tmp/edited.lua" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
grep -q "plan: 2 steps, final loss" "$tmp/out"

# the plan's script declares its plans as knobs with the planner's predictions: the tuner runs the
# best predicted first, and --from-plan 2 only the two best (here on a tiny checkpoint)
tiny="$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures/hf/gpt2-tiny" && pwd)"
"$bin" plan "$tiny" --cluster 1x2:cpu --batch 4 --seq 16 --steps 3 --max-stages 1 --out "$tmp/tiny.lua" >/dev/null
grep -q '^slapo.predict({' "$tmp/tiny.lua"
(cd "$tmp" && "$bin" tune tiny.lua --nproc 2 --from-plan 2 --db "$tmp/tune.jsonl" >"$tmp/tune.out" 2>&1) \
  || { cat "$tmp/tune.out"; exit 1; }
[ "$(grep -c '"status":"ok"' "$tmp/tune.jsonl")" -eq 2 ] || { cat "$tmp/tune.out" "$tmp/tune.jsonl"; exit 1; }
grep -q "predicted [0-9.]* s/step" "$tmp/tune.out"
"$bin" run --nproc 2 --knob tp=2 --knob zero=false "$tmp/tiny.lua" 2>&1 | grep -q "2 steps\|3 steps, final loss" \
  || { echo "the plan script does not run with --knob tp=2"; exit 1; }

# GPT-Neo, OPT, RoBERTa, ALBERT and T5 (transformers' own checkpoints): their plans verify against the
# unscheduled model and train on 2 ranks, tensor parallel (each family's schedule) and fully sharded; ALBERT's
# shared layers and T5's encoder-decoder are planned as one stage, and the table says why
for family in gpt-neo-tiny opt-tiny roberta-tiny albert-tiny t5-tiny; do
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures/hf/$family" && pwd)"
  "$bin" plan "$dir" --cluster 1x2:cpu --batch 4 --seq 16 --steps 2 --out "$tmp/$family.lua" >"$tmp/family.table"
  case $family in
    albert-tiny|t5-tiny) grep -q "^  one stage: " "$tmp/family.table" || { cat "$tmp/family.table"; exit 1; } ;;
    *) "$bin" plan "$dir" --cluster 1x2:cpu --batch 4 --seq 16 --steps 2 --max-stages 1 --out "$tmp/$family.lua" \
         >/dev/null ;;
  esac
  grep -q "slapo.schedules.$(echo "${family%-tiny}" | tr - _)" "$tmp/$family.lua" \
    || { echo "$family: the plan does not use its family's schedule"; cat "$tmp/$family.lua"; exit 1; }
  for knobs in "--knob tp=2 --knob zero=false" "--knob tp=1 --knob zero=false --knob fully_shard=true"; do
    # shellcheck disable=SC2086
    "$bin" run --nproc 2 $knobs "$tmp/$family.lua" >"$tmp/family.out" 2>&1 || { cat "$tmp/family.out"; exit 1; }
    grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/family.out" \
      || { echo "$family plan with '$knobs' did not verify:"; cat "$tmp/family.out"; exit 1; }
    grep -q "^plan: 2 steps, final loss" "$tmp/family.out"
  done
done

# a mixture of experts (transformers' own Mixtral checkpoint): the table prices the all-to-all and says
# what it assumes; the script spreads the experts over ep replicas (a knob), and verifies and trains on
# 4 ranks with them spread, with TP of attention and experts, and fully sharded (each expert over the
# replicas holding it)
mixtral="$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures/hf/mixtral-tiny" && pwd)"
"$bin" plan "$mixtral" --cluster 1x4:cpu --batch 8 --seq 16 --steps 2 --max-stages 1 --out "$tmp/moe.lua" \
  >"$tmp/moe.table"
grep -q " ep comm " "$tmp/moe.table" && grep -q "^  experts: 4 a layer, 2 a token" "$tmp/moe.table" \
  && grep -q ", ep [24]" "$tmp/moe.table" || { cat "$tmp/moe.table"; exit 1; }
grep -q '^plan.ep = knob("ep", { 1, 2, 4 }, plan.ep)$' "$tmp/moe.lua"
for knobs in "--knob ep=2 --knob zero=false --knob fully_shard=false" "--knob tp=2 --knob ep=2 --knob zero=false" \
  "--knob ep=2 --knob zero=false --knob fully_shard=true --knob checkpoint=1" \
  "--knob ep=2 --knob zero=true --knob fully_shard=false"; do
  # shellcheck disable=SC2086
  "$bin" run --nproc 4 $knobs "$tmp/moe.lua" >"$tmp/moe.out" 2>&1 || { cat "$tmp/moe.out"; exit 1; }
  grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/moe.out" \
    || { echo "Mixtral plan with '$knobs' did not verify:"; cat "$tmp/moe.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/moe.out"
done
# pipelines of it: the planner offers stages with the experts spread over ep replicas of each; the
# script spreads them in every stage, averages them over the replicas holding the same experts, and
# verifies and trains on 4 ranks (pp 2 x ep 2), 8 (pp 2 x dp 4, ep 2: each expert on 2 ranks) and 8
# with TP of attention and experts (tp 2 x dp 2 x pp 2, ep 2)
for staged in "tp 1 x dp 2 x pp 2 (1+1), ep 2, 2 micro" "tp 1 x dp 4 x pp 2 (1+1), ep 2, 2 micro" \
  "tp 2 x dp 2 x pp 2 (1+1), ep 2, 2 micro"; do
  [[ $staged == "tp 1 x dp 2 "* ]] && cluster=1x4 || cluster=1x8
  "$bin" plan "$mixtral" --cluster "$cluster:cpu" --batch 8 --seq 16 --steps 2 --pick "$staged" \
    --out "$tmp/moe_pp.lua" >/dev/null
  grep -q "expert_dp_group = plan.ep > 1 and layout.expert_dp_group" "$tmp/moe_pp.lua"
  "$bin" run --nproc "${cluster#1x}" "$tmp/moe_pp.lua" >"$tmp/moe_pp.out" 2>&1 || { cat "$tmp/moe_pp.out"; exit 1; }
  grep -q "^verify: the pipeline's loss and [0-9]* gradients match the unscheduled model" "$tmp/moe_pp.out" \
    || { echo "Mixtral pipeline '$staged' did not verify:"; cat "$tmp/moe_pp.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/moe_pp.out"
done

# long sequences: the planner offers context parallelism (cp and its method, knobs) for 16k tokens
# and more; the script, its sequence edited down to what this machine's eager attention holds in
# verify, splits each sequence over cp replicas (ring attention, or Ulysses' all-to-all where the
# heads divide), verifies and trains
long="$tmp/llama-long"
cp -r "$(dirname "${BASH_SOURCE[0]}")/../fixtures/hf/llama-tiny" "$long"
sed -i 's/"max_position_embeddings": 128/"max_position_embeddings": 16384/' "$long/config.json"
"$bin" plan "$long" --cluster 1x4:cpu --batch 2 --seq 16384 --steps 2 --max-stages 1 --out "$tmp/long.lua" \
  >"$tmp/long.table"
grep -q ", cp [24]" "$tmp/long.table" || { cat "$tmp/long.table"; exit 1; }
grep -q '^plan.cp = knob("cp", { 1, 2, 4 }, plan.cp)$' "$tmp/long.lua" || { cat "$tmp/long.lua"; exit 1; }
grep -q ', cp [24] all-to-all' "$tmp/long.table" || { cat "$tmp/long.table"; exit 1; }
grep -q '^plan.cp_method = knob("cp_method", { "ring", "all_to_all" }, plan.cp_method)$' "$tmp/long.lua" \
  || { cat "$tmp/long.lua"; exit 1; }
sed -i 's/seq = 16384,/seq = 256,/' "$tmp/long.lua"
for knobs in "--knob tp=1 --knob cp=2 --knob cp_method=ring" "--knob tp=1 --knob cp=4 --knob checkpoint=1 --knob \
  cp_method=ring" "--knob tp=2 --knob cp=2 --knob cp_method=ring" "--knob tp=1 --knob cp=2 --knob cp_method=all_to_all" \
  "--knob tp=2 --knob cp=2 --knob cp_method=all_to_all" \
  "--knob tp=1 --knob cp=2 --knob cp_method=ring --knob fully_shard=true --knob reshard_after_forward=false" \
  "--knob tp=1 --knob cp=2 --knob cp_method=all_to_all --knob zero=true"; do
  # shellcheck disable=SC2086
  "$bin" run --nproc 4 --knob zero=false --knob fully_shard=false --knob micro_batches=1 $knobs "$tmp/long.lua" \
    >"$tmp/long.out" 2>&1 || { cat "$tmp/long.out"; exit 1; }
  grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/long.out" \
    || { echo "long-sequence plan with '$knobs' did not verify:"; cat "$tmp/long.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/long.out" || { cat "$tmp/long.out"; exit 1; }
done
# Megatron's sequence parallelism inside TP beside cp: the plan picked, its script's layers split their
# tokens over the tp ranks of each cp rank's share of the sequence, by the ring and by all-to-all
"$bin" plan "$long" --cluster 1x4:cpu --batch 2 --seq 16384 --steps 2 --max-stages 1 \
  --pick "tp 2 x dp 2, cp 2, sequence" --out "$tmp/long_sp.lua" >"$tmp/long_sp.table"
grep -q '^  sequence = true,' "$tmp/long_sp.lua" || { cat "$tmp/long_sp.lua"; exit 1; }
sed -i 's/seq = 16384,/seq = 256,/' "$tmp/long_sp.lua"
for method in ring all_to_all; do
  "$bin" run --nproc 4 --knob zero=false --knob fully_shard=false --knob micro_batches=1 --knob cp_method=$method \
    "$tmp/long_sp.lua" >"$tmp/long.out" 2>&1 || { cat "$tmp/long.out"; exit 1; }
  grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/long.out" \
    || { echo "sequence parallelism beside cp ($method) did not verify:"; cat "$tmp/long.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/long.out" || { cat "$tmp/long.out"; exit 1; }
done
# context parallelism in pipeline stages: the grid's pp 2 x cp 2 plan (considered, not named: no
# "(named)"), its script splits each sequence over the cp replicas of both stages, by the ring and by
# all-to-all, verifies against the unscheduled model and trains
"$bin" plan "$long" --cluster 1x4:cpu --batch 2 --seq 16384 --steps 2 \
  --pick "tp 1 x dp 2 x pp 2 (1+1), cp 2, 2 micro" --out "$tmp/long_pp.lua" >"$tmp/long_pp.table"
grep -qE '^  tp 1 x dp 2 x pp 2 \(1\+1\), cp 2, 2 micro .* picked, [0-9]+% slower$' "$tmp/long_pp.table" \
  || { cat "$tmp/long_pp.table"; exit 1; }
grep -q '^  cp = 2,' "$tmp/long_pp.lua" || { cat "$tmp/long_pp.lua"; exit 1; }
sed -i 's/seq = 16384,/seq = 256,/' "$tmp/long_pp.lua"
for method in ring all_to_all; do
  sed "s/cp_method = \"ring\"/cp_method = \"$method\"/" "$tmp/long_pp.lua" >"$tmp/long_pp_$method.lua"
  "$bin" run --nproc 4 "$tmp/long_pp_$method.lua" >"$tmp/long.out" 2>&1 || { cat "$tmp/long.out"; exit 1; }
  grep -q "^verify: the pipeline's loss and [0-9]* gradients match the unscheduled model" "$tmp/long.out" \
    || { echo "pp 2 x cp 2 ($method) did not verify:"; cat "$tmp/long.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/long.out" || { cat "$tmp/long.out"; exit 1; }
done

# the pipeline script trains through slapo.train, so a token file takes the random rows' place: the
# pp 2 x cp 2 script, its data a file of packed documents kept apart (position_ids), trains 2 steps
python3 - "$tmp/packed.tokens" <<'PY'
import random, struct, sys
random.seed(3)
lengths = [random.randint(20, 300) for _ in range(12)]
ids = [random.randrange(1000) for _ in range(sum(lengths))]
offsets = [0]
for n in lengths:
    offsets.append(offsets[-1] + n)
with open(sys.argv[1], "wb") as f:
    f.write(b"SLAPOTK1" + struct.pack("<QQII", len(ids), len(lengths), 1000, 0))
    f.write(struct.pack(f"<{len(ids)}I", *ids) + struct.pack(f"<{len(offsets)}Q", *offsets))
PY
sed "s|data = { vocab = vocab, batch = replica_batch, seq = plan.seq },|data = { tokens = \"$tmp/packed.tokens\", \
  batch = plan.batch, seq = plan.seq, documents = \"separate\" },|" "$tmp/long_pp_ring.lua" >"$tmp/long_pp_text.lua"
grep -q 'documents = "separate"' "$tmp/long_pp_text.lua" || { echo "the pipeline script's data line moved:"; \
  grep -n "data = " "$tmp/long_pp_ring.lua"; exit 1; }
"$bin" run --nproc 4 "$tmp/long_pp_text.lua" >"$tmp/long.out" 2>&1 || { cat "$tmp/long.out"; exit 1; }
grep -q "^plan: 2 steps, final loss" "$tmp/long.out" || { cat "$tmp/long.out"; exit 1; }

# every kind of one-stage plan the planner writes for 4 ranks verifies against the unscheduled
# model and trains, gradient accumulation included: plain, tensor parallel, ZeRO-1, fully sharded
# (ZeRO-3, with TP inside), and fully sharded with the weights kept to backward (ZeRO-2)
"$bin" plan "$tiny" --cluster 1x4:cpu --batch 8 --seq 16 --steps 2 --max-stages 1 --out "$tmp/four.lua" >/dev/null
for knobs in "" "--knob tp=2 --knob checkpoint=1 --knob micro_batches=2" "--knob tp=4 --knob zero=false" \
  "--knob zero=false --knob fully_shard=true --knob reshard_after_forward=true" \
  "--knob tp=2 --knob zero=false --knob fully_shard=true --knob reshard_after_forward=true --knob checkpoint=1" \
  "--knob zero=false --knob fully_shard=true --knob reshard_after_forward=false --knob micro_batches=2"; do
  # shellcheck disable=SC2086
  "$bin" run --nproc 4 $knobs "$tmp/four.lua" >"$tmp/four.out" 2>&1 || { cat "$tmp/four.out"; exit 1; }
  grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/four.out" \
    || { echo "plan with '$knobs' did not verify:"; cat "$tmp/four.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/four.out"
done

# pipelines: on a slow device with slow links the plan for 4 ranks of a small GPT-2 is a
# pipeline with uneven stages; it verifies and trains. Edited by hand (the stage boundary moved, the
# first stage checkpointed, ZeRO-1; or tp 2 x dp 1; or each stage's layers fully sharded over 2
# replicas) it verifies and trains again.
# a device profile: write_profile FILE NAME MEMORY_BYTES TFLOPS LINK_GBPS LINK_LATENCY_US (links that
# hide nothing behind compute, so fully sharded replicas pay every gather)
write_profile() {
  printf '{"device": "%s", "memory_bytes": %s,\n "matmul": [{"dtype": "float32", "m": 1024, "k": 1024, "n": 1024, "tflops": %s}],\n "links": {"intra_GBps": %s, "intra_latency_us": %s, "inter_GBps": %s, "inter_latency_us": %s, "overlap": 0}}\n' \
    "$2" "$3" "$4" "$5" "$6" "$5" "$6" >"$1"
}
write_profile "$tmp/pp.json" pipeline-friendly 8e9 0.05 0.5 50
cat > "$tmp/gen.lua" <<'LUA'
local model = slapo.models.gpt2({ n_embd = 64, n_layer = 4, n_head = 4, vocab_size = 2048, n_positions = 64 })
-- the one-layout program's pipeline, picked by its search's name (Alpa's plan is faster here)
local p = slapo.plan(model, { cluster = "1x4:" .. arg[1], batch = 8, seq = 32, steps = 2, pick = "inter-op" })
print(p)
assert(p.origin == "inter-op", "picked " .. p.name)
assert(p.pp == 2, "expected a 2-stage pipeline")
assert(p.stages[1].layers ~= p.stages[2].layers, "expected uneven stages")
local f = assert(io.open(arg[2], "w"))
f:write(p.source)
f:close()
LUA
"$bin" run "$tmp/gen.lua" "$tmp/pp.json" "$tmp/pp.lua" >"$tmp/pp.table" || { cat "$tmp/pp.table"; exit 1; }
grep -q "cut_pipeline_stage" "$tmp/pp.lua"
python3 - "$tmp/pp.lua" <<'PY'
import re, sys
path = sys.argv[1]
src = open(path).read()
counts = [int(n) for n in re.findall(r"    \{ layers = (\d+), checkpoint = (?:true|false) \},\n", src)]
big, small = (0, -1) if counts[0] > counts[-1] else (-1, 0)
counts[big], counts[small] = counts[big] - 1, counts[small] + 1  # move the boundary one layer
body = "".join(f"    {{ layers = {n}, checkpoint = {'true' if i == 0 else 'false'} }},\n" for i, n in enumerate(counts))
moved = re.sub(r"(  stages = \{[^\n]*\n)(?:    \{ layers[^\n]*\n)+", lambda m: m.group(1) + body, src)
open(path.replace(".lua", "_moved.lua"), "w").write(re.sub(r"^  zero = \w+,", "  zero = true,", moved, flags=re.M))
mesh = re.sub(r"^  tp = \d+,", "  tp = 2,", src, flags=re.M)
open(path.replace(".lua", "_tp.lua"), "w").write(re.sub(r"^  dp = \d+,", "  dp = 1,", mesh, flags=re.M))
fsdp = re.sub(r"^  tp = \d+,", "  tp = 1,", src, flags=re.M)
fsdp = re.sub(r"^  dp = \d+,", "  dp = 2,", fsdp, flags=re.M)
fsdp = re.sub(r"^  zero = \w+,", "  zero = false,", fsdp, flags=re.M)
open(path.replace(".lua", "_fsdp.lua"), "w").write(re.sub(r"^  fully_shard = \w+,", "  fully_shard = true,", fsdp, flags=re.M))
PY
grep -q "^  fully_shard = true," "$tmp/pp_fsdp.lua"
for script in pp pp_moved pp_tp pp_fsdp; do
  "$bin" run --nproc 4 "$tmp/$script.lua" >"$tmp/pp.out" 2>&1 || { cat "$tmp/$script.lua" "$tmp/pp.out"; exit 1; }
  grep -q "^verify: the pipeline's loss and [0-9]* gradients match the unscheduled model" "$tmp/pp.out"
  grep -q "^plan: 2 steps, final loss" "$tmp/pp.out"
done

# stages on meshes of their own (Alpa's submeshes): on 4 ranks of that device the planner picks stages
# on 1, 1 and 2 ranks, the last tensor-parallel with its tokens split; on 3 ranks and batch 12, one rank
# and two replicas. Each script verifies and trains; the second, edited (the boundary moved, the first
# stage checkpointed, ZeRO-1 over the replicas; or the first stage on tp 2, a fourth rank), again.
cat > "$tmp/gen_mesh.lua" <<'LUA'
local model = slapo.models.gpt2({ n_embd = 64, n_layer = 4, n_head = 4, vocab_size = 2048, n_positions = 64 })
local p = slapo.plan(model, { cluster = "1x" .. arg[2] .. ":" .. arg[1], batch = tonumber(arg[3]), seq = 32, steps = 2 })
assert(p.origin == "alpa", "expected Alpa's plan with a submesh per stage, got " .. p.name)
local f = assert(io.open(arg[4], "w"))
f:write(p.source)
f:close()
LUA
"$bin" run "$tmp/gen_mesh.lua" "$tmp/pp.json" 4 8 "$tmp/mesh4.lua" >/dev/null
"$bin" run "$tmp/gen_mesh.lua" "$tmp/pp.json" 3 12 "$tmp/mesh3.lua" >/dev/null
grep -q '^    { layers = [0-9]*, tp = 2, dp = 1, checkpoint = false, zero = false, sequence = true },' "$tmp/mesh4.lua" \
  || { echo "expected a tensor-parallel stage with its tokens split:"; cat "$tmp/mesh4.lua"; exit 1; }
grep -q '^  \["2x1, sequence"\] = function(layer)$' "$tmp/mesh4.lua"
python3 - "$tmp/mesh3.lua" <<'PY'
import re, sys
path = sys.argv[1]
src = open(path).read()
rows = re.findall(r"^    \{ layers = (\d+), tp = (\d+), dp = (\d+), .*\},$", src, flags=re.M)
assert [(t, d) for _, t, d in rows] == [("1", "1"), ("1", "2")], rows
a, b = int(rows[0][0]), int(rows[1][0])
edited = re.sub(r"^    \{ layers = \d+, tp = 1, dp = 1, .*\},$",
                f"    {{ layers = {a - 1}, tp = 1, dp = 1, checkpoint = true, zero = false, sequence = false }},", src,
                flags=re.M)
edited = re.sub(r"^    \{ layers = \d+, tp = 1, dp = 2, .*\},$",
                f"    {{ layers = {b + 1}, tp = 1, dp = 2, checkpoint = false, zero = true, sequence = false }},", edited,
                flags=re.M)
open(path.replace(".lua", "_moved.lua"), "w").write(edited)
open(path.replace(".lua", "_tp.lua"), "w").write(src.replace("tp = 1, dp = 1,", "tp = 2, dp = 1,", 1))
PY
for case in "4 mesh4" "3 mesh3" "3 mesh3_moved" "4 mesh3_tp"; do
  read -r ranks script <<<"$case"
  "$bin" run --nproc "$ranks" "$tmp/$script.lua" >"$tmp/mesh.out" 2>&1 || { cat "$tmp/$script.lua" "$tmp/mesh.out"; exit 1; }
  grep -q "^verify: the pipeline's loss and [0-9]* gradients match the unscheduled model" "$tmp/mesh.out" \
    || { echo "$script did not verify:"; cat "$tmp/mesh.out"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/mesh.out"
done

# BERT and LLaMA plans verify and train too: tp 2 x pp 2 on 4 ranks, tp 2 on 2 ranks
cat > "$tmp/gen_model.lua" <<'LUA'
local kind, ranks, pick, out = arg[2], arg[3], arg[4], arg[5]
local model = kind == "bert" and slapo.models.bert({ hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4,
    intermediate_size = 128, vocab_size = 2048, max_position_embeddings = 64 })
  or slapo.models.llama({ hidden_size = 64, num_hidden_layers = 4, num_attention_heads = 4, num_key_value_heads = 2,
    intermediate_size = 128, vocab_size = 2048 })
local p = slapo.plan(model, { cluster = "1x" .. ranks .. ":" .. arg[1], batch = 8, seq = 32, steps = 2, pick = pick })
local f = assert(io.open(out, "w"))
f:write(p.source)
f:close()
LUA
for kind in bert llama; do
  # sequence parallelism (the pass's layout with each layer's tokens split) first; the last case's
  # script is edited below
  for case in "2|tp 2 x dp 1, sequence|1 output(s)" "4|tp 2 x dp 1 x pp 2 (2+2), 2 micro, sequence|the pipeline's loss" \
    "4|tp 2 x dp 1 x pp 2 (2+2), 2 micro|the pipeline's loss" "2|tp 2 x dp 1|1 output(s)"; do
    IFS='|' read -r ranks pick verified <<<"$case"
    "$bin" run "$tmp/gen_model.lua" "$tmp/pp.json" "$kind" "$ranks" "$pick" "$tmp/$kind.lua" >/dev/null
    "$bin" run --nproc "$ranks" "$tmp/$kind.lua" >"$tmp/model.out" 2>&1 || { cat "$tmp/model.out"; exit 1; }
    grep -q "^verify: $verified and [0-9]* gradients match the unscheduled model" "$tmp/model.out" \
      || { echo "$kind, $pick did not verify:"; cat "$tmp/model.out"; exit 1; }
    grep -q "^plan: 2 steps, final loss" "$tmp/model.out"
  done
  # at this width the intra-op pass keeps the projections whole, and the script runs that; the
  # reference schedule's layout, switched on by the edit the script's comment names, runs too
  grep -q "^local function shard_layer(layer)$" "$tmp/$kind.lua"
  grep -q "stays replicated$" "$tmp/$kind.lua"
  sed -i 's/^local function shard_layer(layer)$/local shard_layer = nil\nlocal function pass_layer(layer)/' "$tmp/$kind.lua"
  "$bin" run --nproc 2 "$tmp/$kind.lua" >"$tmp/model.out" 2>&1 || { cat "$tmp/model.out"; exit 1; }
  grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/model.out" \
    || { echo "$kind with the reference layout did not verify:"; cat "$tmp/model.out"; exit 1; }
done

# a bf16 plan (for simulated H100s) trains under bf16 autocast on CPU ranks too: Megatron's layers,
# whose all-reduces Gloo carries as float32, and a pipeline
cat > "$tmp/gen_bf16.lua" <<'LUA'
local model = slapo.models.gpt2({ n_embd = 64, n_layer = 4, n_head = 4, vocab_size = 2048, n_positions = 64 })
local p = slapo.plan(model, { cluster = "1x2:h100", batch = 8, seq = 32, steps = 2, dtype = "bfloat16",
  layer_costs = "megatron", pick = arg[1] })
local f = assert(io.open(arg[2], "w"))
f:write(p.source)
f:close()
LUA
for pick in "tp 2 x dp 1" "tp 1 x dp 1 x pp 2 (2+2), 1 micro"; do
  "$bin" run "$tmp/gen_bf16.lua" "$pick" "$tmp/bf16.lua" >/dev/null
  grep -q '^  dtype = "bfloat16",' "$tmp/bf16.lua"
  "$bin" run --nproc 2 "$tmp/bf16.lua" >"$tmp/bf16.out" 2>&1 || { cat "$tmp/bf16.out"; exit 1; }
  grep -q "^verify: .* match the unscheduled model" "$tmp/bf16.out" || { echo "bf16 $pick did not verify"; exit 1; }
  grep -q "^plan: 2 steps, final loss" "$tmp/bf16.out" || { echo "bf16 $pick did not train"; cat "$tmp/bf16.out"; exit 1; }
done

# a device too small for anything but fully sharded replicas: the planner fully shards them, and
# the script verifies and trains so on 2 ranks (a small vocabulary: tensor parallelism splits a
# large one, whose whole gradient fully sharded replicas compute before reducing it)
write_profile "$tmp/small.json" small-memory 3.5e6 1.0 10 10
cat > "$tmp/gen_fsdp.lua" <<'LUA'
local model = slapo.models.gpt2({ n_embd = 64, n_layer = 4, n_head = 4, vocab_size = 256, n_positions = 64 })
local p = slapo.plan(model, { cluster = "1x2:" .. arg[1], batch = 4, seq = 32, steps = 2, max_stages = 1 })
assert(p.fully_sharded, "expected a fully sharded plan, got " .. p.name)
require("slapo.util").write_file(arg[2], p.source)
LUA
"$bin" run "$tmp/gen_fsdp.lua" "$tmp/small.json" "$tmp/fsdp.lua" >/dev/null
"$bin" run --nproc 2 "$tmp/fsdp.lua" >"$tmp/fsdp.out" 2>&1 || { cat "$tmp/fsdp.out"; exit 1; }
grep -q "^verify: 1 output(s) and [0-9]* gradients match the unscheduled model" "$tmp/fsdp.out" \
  || { echo "the fully sharded plan did not verify:"; cat "$tmp/fsdp.out"; exit 1; }
grep -q "^plan: 2 steps, final loss" "$tmp/fsdp.out" || { echo "the fully sharded plan did not train"; cat "$tmp/fsdp.out"; exit 1; }

# profile-device measures this machine into a profile the planner reads
"$bin" profile-device --quick --out "$tmp/dev.json" >"$tmp/profile.out"
grep -q "| 256 x 256 x 256 | float32 |" "$tmp/profile.out"
grep -q '"memory_shared": true' "$tmp/dev.json"
# measured as one of 2 ranks sharing the machine: a copy of the profile runs beside it, and is gone after
"$bin" profile-device --quick --threads 1 --ranks 2 --out "$tmp/dev2.json" >/dev/null
grep -q '"ranks": 2' "$tmp/dev2.json"
grep -q '"device": "cpu (1 threads), beside 1 more"' "$tmp/dev2.json"
# ... and its links are Gloo all-reduces among those ranks, timed and fitted
python3 - "$tmp/dev2.json" <<'PY'
import json, sys
links = json.load(open(sys.argv[1]))["links"]
assert links["source"].startswith("intra: Gloo all-reduces among the 2 ranks of this profile, measured"), links
assert [r["bytes"] for r in links["all_reduce"]] == [1024, 16777216], links
assert links["intra_GBps"] > 0 and links["intra_latency_us"] > 0, links
# ... and how much of a gather hid behind matmuls run while it was in flight, a fraction
m = links["overlap_measured"]
assert 0 <= links["overlap"] <= 1 and m["gather_s"] > 0 and m["compute_s"] > 0 and m["both_s"] > 0, links
expected = min(1, max(0, (m["gather_s"] + m["compute_s"] - m["both_s"]) / min(m["gather_s"], m["compute_s"])))
assert abs(links["overlap"] - expected) < 1e-9, links
PY
"$bin" plan gpt2 --cluster 1x2:"$tmp/dev.json" --batch 4 --seq 32 >"$tmp/table2"
grep -q "on 1 x 2 cpu" "$tmp/table2"
set +e
"$bin" profile-device --device cuda >/dev/null 2>"$tmp/err"; rc=$?
set -e
expect_code 1 "$rc"
grep -q "profile-device: --device cuda, but this build of LibTorch sees no CUDA device" "$tmp/err"

# errors name the option
set +e
"$bin" plan gpt2 --cluster 2:cpu >/dev/null 2>"$tmp/err"; rc=$?
set -e
expect_code 1 "$rc"
grep -q "plan: --cluster '2:cpu' is not NODESxDEVICES:DEVICE" "$tmp/err"
set +e
"$bin" plan gpt2-large --cluster 1x1:"$tmp/pp.json" --batch 8 --seq 1024 >/dev/null 2>"$tmp/err"; rc=$?
set -e
expect_code 1 "$rc"
grep -q "does not fit 1 x 1: the most sharded plan" "$tmp/err" || { cat "$tmp/err"; exit 1; }
# pins from a schedule file (--from): its stage cut and checkpointed layer are kept, the plan without
# them is priced beside, and the written pipeline verifies and trains on 2 ranks
cat > "$tmp/pins.lua" <<'LUA'
return function(sch, args)
  sch["transformer.h.0"]:checkpoint()
  sch["transformer.h.0"]:cut_pipeline_stage()
end
LUA
"$bin" plan "$tiny" --cluster 1x2:cpu --batch 4 --seq 16 --steps 2 --from "$tmp/pins.lua" --out "$tmp/pinned.lua" \
  >"$tmp/pinned.table"
grep -q "^  pinned: pp 2 (1c+1 layers); the planner's choice without them:" "$tmp/pinned.table" \
  || { cat "$tmp/pinned.table"; exit 1; }
sed -n 3p "$tmp/pinned.table" | grep -q "^  tp 1 x dp 1 x pp 2 (1c+1), .* chosen$" || { cat "$tmp/pinned.table"; exit 1; }
"$bin" run --nproc 2 "$tmp/pinned.lua" >"$tmp/pinned.out" 2>&1 || { cat "$tmp/pinned.lua" "$tmp/pinned.out"; exit 1; }
grep -q "^verify: the pipeline's loss and [0-9]* gradients match the unscheduled model" "$tmp/pinned.out" \
  || { cat "$tmp/pinned.out"; exit 1; }
grep -q "^plan: 2 steps, final loss" "$tmp/pinned.out"
echo 'return 42' > "$tmp/not_schedule.lua"
set +e
"$bin" plan "$tiny" --cluster 1x2:cpu --from "$tmp/not_schedule.lua" >/dev/null 2>"$tmp/err"; rc=$?
set -e
expect_code 1 "$rc"
grep -qF "plan: --from $tmp/not_schedule.lua returned number; a schedule file must return function(sch, args) ... end" \
  "$tmp/err" || { cat "$tmp/err"; exit 1; }
# primitives at the top level, as a pasted snippet has them: the error says to wrap them
echo 'sch["transformer.h.0"]:fully_shard()' > "$tmp/bare_snippet.lua"
set +e
"$bin" plan "$tiny" --cluster 1x2:cpu --from "$tmp/bare_snippet.lua" >/dev/null 2>"$tmp/err"; rc=$?
set -e
expect_code 1 "$rc"
grep -qF "failed as it loaded (" "$tmp/err" && grep -qF "attempt to index global 'sch'" "$tmp/err" &&
  grep -qF 'e.g. return function(sch) sch["transformer.h.0"]:fully_shard() end' "$tmp/err" || { cat "$tmp/err"; exit 1; }

echo "plan ok: $(sed -n 3p "$tmp/table" | sed 's/  */ /g')"
