#!/usr/bin/env bash
# Every shell command that README.md and docs/*.md tell a user to run (their ```sh blocks), run as
# written from a scratch directory that links examples/, tests/, scripts/ and build/ in, so nothing
# it writes lands in the checkout. Commands that train get small sizes (the flags appended are
# printed beside them). Commands that stand for the user's own script or machines (x.lua,
# train.lua, host addresses), that need a terminal, or that are scripts/test's own suites are
# listed with the reason instead. Prints one line a command; fails when one fails.
set -euo pipefail
bin="$(realpath "$1")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for d in examples tests scripts; do ln -s "$root/$d" "$scratch/$d"; done
[ -d "$root/data" ] && ln -s "$root/data" "$scratch/data"  # what scripts/fetch-data fetched
ln -s "$(dirname "$bin")" "$scratch/build"  # scripts/run finds the build it would make there
# (4 layers and 8 rows: enough for the docs' pipelines, 2 stages x 2 chunks and 8 micro-batches)
schedule_small="--steps 2 --layers 4 --hidden 64 --heads 4 --vocab 512 --seq 16 --batch 8"
sotu_small="--steps 10 --texts 2 --seq 32 --batch 4 --hidden 64 --layers 2"

# the commands, one a line: comments stripped, `build/slapo-lua` and `slapo-lua` alike (the docs
# mean the built one by both), each once, in the order the docs give them
commands() {
  for f in "$root/README.md" "$root"/docs/*.md; do
    awk '/^```(sh|bash)[[:space:]]*$/ { on = 1; next } /^```/ { on = 0 } on' "$f"
  done | sed -e 's/[[:space:]]#.*$//' -e 's/^#.*$//' -e 's/[[:space:]]*$//' -e 's#^build/slapo-lua #slapo-lua #' |
    awk 'NF && !seen[$0]++'
}

# why a command is not run here, or nothing when it is
not_run_because() {
  case "$1" in
    scripts/test) echo "scripts/test is what runs this check" ;;
    *" test tests/lua"|*" test --nproc 2 tests/dist") echo "one of scripts/test's own suites (lua, dist)" ;;
    torchrun*) echo "torchrun (PyTorch's launcher, from pip) is not part of this project; tests/cli/test_launcher.sh runs its env contract" ;;
    *" x.lua"|*" train.lua") echo "a form to fill in: the user's script and machines" ;;
    *" --watch "*) echo "waits for edits; tests/cli/test_watch.sh drives it" ;;
    *"plan gpt2-medium"*" --out plan.lua") echo "its plan.lua trains GPT-2 medium for minutes on 2 CPU ranks; the README's gpt2 plan runs instead" ;;
  esac
}

# flags a command gets here so it trains small
small_flags() {
  case "$1" in
    *examples/*_schedule.lua*) echo "$schedule_small" ;;
    *examples/gpt2_sotu.lua*|*examples/gpt_neo_sotu.lua*|*examples/opt_sotu.lua*|*examples/roberta_sotu.lua*|\
      *examples/albert_sotu.lua*|*examples/t5_sotu.lua*|*examples/mixtral_sotu.lua*|*examples/bert_sotu.lua*) echo "$sotu_small" ;;
    *examples/llama3_sotu.lua*) echo "--steps 2 --seq 16 --batch 2 --hidden 32 --layers 1" ;;
  esac
}

ran=0 listed=0 failed=0
while IFS= read -r cmd; do
  why=$(not_run_because "$cmd")
  if [ -n "$why" ]; then
    echo "not run: $cmd  ($why)"
    listed=$((listed + 1))
    continue
  fi
  line="$cmd"
  case "$line" in slapo-lua*) line="build/$line" ;; esac
  case "$line" in *" repl "*) line="$line </dev/null" ;; esac  # the REPL reads its prompt lines from stdin
  extra=$(small_flags "$line")
  [ -n "$extra" ] && line="$line $extra"
  start=$(date +%s)
  if (cd "$scratch" && eval "$line") >"$scratch/out" 2>&1; then
    echo "ok ($(( $(date +%s) - start )) s): $cmd${extra:+  [+ $extra]}"
    ran=$((ran + 1))
  else
    echo "FAILED: $cmd${extra:+  [+ $extra]}"
    tail -20 "$scratch/out" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
done < <(commands)
echo "doc commands: $ran ran, $failed failed, $listed not run (reasons above)"
# (a floor on what ran: a change in how the docs fence commands must not leave nothing to run)
[ "$failed" -eq 0 ] && [ "$ran" -ge 15 ]
