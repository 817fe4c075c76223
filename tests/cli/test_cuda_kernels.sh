#!/usr/bin/env bash
# The CUDA kernels compared with their CPU references on a GPU (tests/cuda/check_kernels.cu). On a
# machine without one the check exits 77 and this test is skipped, never passed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "skip: no /usr/local/cuda/bin/nvcc on this machine: cuda kernel self-check"
  exit 77
fi
dir="${SLAPO_CUDA_BUILD_DIR:-$root/build-cuda}"
[ -f "$dir/build.ninja" ] || cmake -S "$root" -B "$dir" -G Ninja -DSLAPO_CUDA=ON -DSLAPO_PCH=OFF >/dev/null
cmake --build "$dir" --target slapo_cuda_check >/dev/null
exec "$dir/slapo_cuda_check"
