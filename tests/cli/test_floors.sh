#!/usr/bin/env bash
# The floors of src/, lowest first: a file includes headers of its own folder and of floors below
# its own, never of its own floor's other folders or above (docs/architecture.md, "Floors").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
declare -A floor=([core]=0 [distributed]=1 [models]=1 [graph]=2 [io]=2 [primitives]=3 [train]=3 [text]=3 [plan]=4
  [lua]=5 [host]=6)

# Prints each include of `src` that does not go down a floor; fails when there is one.
check() {
  local src=$1 bad=0 file folder target line
  while IFS=: read -r file line target; do
    folder=${file#"$src"/}; folder=${folder%%/*}
    target=${target#*\"}; target=${target%%/*}
    [[ -n "${floor[$folder]:-}" && -n "${floor[$target]:-}" && "$target" != "$folder" ]] || continue
    if (( floor[$target] >= floor[$folder] )); then
      echo "$file:$line: $folder (floor ${floor[$folder]}) includes $target (floor ${floor[$target]})"
      bad=1
    fi
  done < <(grep -rnoE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[a-z_]+/' "$src" --include='*.h' --include='*.cpp' \
    --include='*.cu' | sed -E 's/:[[:space:]]*#[[:space:]]*include[[:space:]]+/:/')
  return $bad
}

# every folder of src/ has a floor
for dir in "$root"/src/*/; do
  name=$(basename "$dir")
  [[ -n "${floor[$name]:-}" ]] || { echo "src/$name has no floor: give it one here and in docs/architecture.md"; exit 1; }
done

# the check catches an include that runs upward (core reading the planner), and one across a floor
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/src/core" "$scratch/src/models"
printf '#include "plan/planner.h"\n' > "$scratch/src/core/a.cpp"
printf '#  include "distributed/group.h"\n' > "$scratch/src/models/b.cpp"  # an indented one too
if out=$(check "$scratch/src"); then echo "the floor check missed: $out"; exit 1; fi
[[ $(grep -c "includes" <<<"$out") == 2 ]] || { echo "the floor check found: $out"; exit 1; }

check "$root/src" || { echo "includes that do not go down a floor (above)"; exit 1; }
echo "every include of src/ goes down a floor"
