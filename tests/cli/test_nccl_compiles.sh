#!/usr/bin/env bash
# The NCCL path of src/dist/world.cpp (ProcessGroupNCCL, built only against a CUDA LibTorch)
# compiles against this LibTorch's c10d headers. Syntax only: Debian's LibTorch has no CUDA to
# link against, and lacks the generated c10/cuda/impl/cuda_cmake_macros.h, which is stubbed here.
set -euo pipefail
bin="$1"
build="$(dirname "$bin")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ ! -f /usr/local/cuda/include/nccl.h ] || [ ! -d /usr/include/c10/cuda ]; then
  echo "skip: no NCCL or c10/cuda headers on this machine"
  exit 0
fi
# a backend this build lacks, or no backend at all, is refused by name
set +e
nccl=$(SLAPO_DIST_BACKEND=nccl "$bin" run --nproc 2 "$root/examples/tour.lua" 2>&1)
mpi=$(SLAPO_DIST_BACKEND=mpi "$bin" run --nproc 2 "$root/examples/tour.lua" 2>&1)
set -e
if ! grep -q "SLAPO_DIST_BACKEND=nccl, but this build has no NCCL" <<<"$nccl"; then
  # a CUDA build with NCCL gets past this point; CPU tensors on NCCL then fail elsewhere
  grep -q "rank 1 of 2 failed" <<<"$nccl" || { echo "nccl: $nccl"; exit 1; }
fi
grep -q "SLAPO_DIST_BACKEND='mpi' is not a backend (choices: gloo, nccl)" <<<"$mpi" || { echo "mpi: $mpi"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/c10/cuda/impl"
echo "#pragma once" >"$tmp/c10/cuda/impl/cuda_cmake_macros.h"
cmd=$(cd "$build" && ninja -t commands CMakeFiles/slapo_core.dir/src/dist/world.cpp.o | grep "src/dist/world.cpp" | tail -1)
cmd=$(echo "$cmd" | sed 's/ -o [^ ]*world\.cpp\.o/ -fsyntax-only/; s/-include [^ ]*cmake_pch\.hxx//; s/-Winvalid-pch//; s/^.*ccache //')
(cd "$build" && eval "$cmd -DSLAPO_WITH_TORCH_CUDA=1 -DUSE_C10D_NCCL=1 -I/usr/local/cuda/include -I$tmp")
version=$(awk '/define TORCH_VERSION_(MAJOR|MINOR)/ {printf "%s%s", sep, $3; sep="."}' /usr/include/torch/csrc/api/include/torch/version.h)
echo "the NCCL backend compiles against LibTorch $version's headers"
