#!/usr/bin/env bash
# scripts/device-kit packs a prefix that CMake configures from: every library the build finds
# beyond LibTorch comes from the kit (what a GPU machine without apt relies on), and
# scripts/device-check parses. Configure only; the full build against the kit is the GPU
# machine's first step.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SLAPO_DEVICE_KIT="$tmp/kit" "$root/scripts/device-kit" >/dev/null
cmake -S "$root" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/kit/usr" -DSLAPO_FMT_HEADER_ONLY=ON >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; exit 1; }
for var in fmt_DIR nlohmann_json_DIR CLI11_DIR doctest_DIR slapo__luajit_LIBRARY slapo__libedit_LIBRARY; do
  value=$(grep -E "^$var:" "$tmp/build/CMakeCache.txt" | cut -d= -f2-)
  [[ "$value" == "$tmp/kit/"* ]] || { echo "$var is '$value', not from the kit"; exit 1; }
done
[ -f "$tmp/kit/gloo/include/gloo/algorithm.h" ] || { echo "no Gloo headers in the kit"; exit 1; }
bash -n "$root/scripts/device-check"
echo "the device kit holds $(find "$tmp/kit" -type f | wc -l) files and CMake finds every library in it"
