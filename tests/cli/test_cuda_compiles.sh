#!/usr/bin/env bash
# -DSLAPO_CUDA=ON compiles kernels/cuda/*.cu with nvcc for sm_80 and sm_90 (no GPU needed to build).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "skip: no /usr/local/cuda/bin/nvcc on this machine"
  exit 77
fi
dir="${SLAPO_CUDA_BUILD_DIR:-$root/build-cuda}"
cmake -S "$root" -B "$dir" -G Ninja -DSLAPO_CUDA=ON -DSLAPO_PCH=OFF >/dev/null
cmake --build "$dir" --target slapo_cuda_kernels slapo_cuda_check >/dev/null
# The fat binaries name the architectures they hold.
archs=$(strings "$dir/libslapo_cuda_kernels.a" | grep -oE 'sm_[0-9]+' | sort -u | tr '\n' ' ')
[[ "$archs" == *sm_80* && "$archs" == *sm_90* ]] || { echo "expected sm_80 and sm_90 code, found: $archs"; exit 1; }
echo "cuda kernels compile for sm_80 and sm_90 (tests/cli/test_cuda_kernels.sh runs them)"
