#!/usr/bin/env bash
# scripts/device-kit packs a prefix that CMake configures from: every library the build finds
# beyond LibTorch comes from the kit (what a GPU machine without apt relies on); and
# scripts/device-check runs its steps and reports them. Configure only; the full build against
# the kit is the GPU machine's first step.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SLAPO_DEVICE_KIT="$tmp/kit" "$root/scripts/device-kit" >/dev/null
cmake -S "$root" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/kit/usr" -DSLAPO_FMT_HEADER_ONLY=ON >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; exit 1; }
for var in fmt_DIR nlohmann_json_DIR CLI11_DIR doctest_DIR slapo__luajit_LIBRARY slapo__libedit_LIBRARY ZLIB_INCLUDE_DIR; do
  value=$(grep -E "^$var:" "$tmp/build/CMakeCache.txt" | cut -d= -f2-)
  [[ "$value" == "$tmp/kit/"* ]] || { echo "$var is '$value', not from the kit"; exit 1; }
done
[ -f "$tmp/kit/gloo/include/gloo/algorithm.h" ] || { echo "no Gloo headers in the kit"; exit 1; }
# device-check's plumbing, with the steps this machine can run on the build at hand: a passing
# step, a failing one (no CUDA here), the table and the exit status
check() {
  SLAPO_DEVICE_KIT="$tmp/kit" SLAPO_TORCH_PREFIX=/usr/lib/x86_64-linux-gnu/cmake OUT="$tmp" \
    SLAPO_DEVICE_BUILD_DIR="$(cd "$(dirname "$1")" && pwd)" SLAPO_DEVICE_STEPS="$2" bash "$root/scripts/device-check"
}
check "$1" "cpp" >"$tmp/ok.log" 2>&1 || { cat "$tmp/ok.log"; exit 1; }
grep -q "^| cpp | ok in" "$tmp/ok.log" || { cat "$tmp/ok.log"; exit 1; }
if check "$1" "cpp kernels_cuda" >"$tmp/fail.log" 2>&1; then
  echo "device-check passed a CUDA step on a machine without CUDA"; exit 1
fi
grep -q "^| kernels_cuda | FAIL (rc 1)" "$tmp/fail.log" || { cat "$tmp/fail.log"; exit 1; }
grep -q "SLAPO_TEST_DEVICE=cuda, but this build or machine has no CUDA" "$tmp/fail.log"
[ -f "$tmp/device-check.log" ] || { echo "no log under \$OUT"; exit 1; }
echo "the device kit holds $(find "$tmp/kit" -type f | wc -l) files and CMake finds every library in it"
