#!/usr/bin/env bash
# The code built only against a CUDA LibTorch compiles against this LibTorch's headers: the NCCL
# backend of src/distributed/world.cpp and the slapo:: ops on CUDA tensors (kernels/ops.cpp with
# kernels/cuda/torch_kernels.cpp). Syntax only: Debian's LibTorch has no CUDA to link against, and
# lacks the generated c10/cuda/impl/cuda_cmake_macros.h, which is stubbed here.
set -euo pipefail
bin="$1"
build="$(dirname "$bin")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ ! -f /usr/local/cuda/include/nccl.h ] || [ ! -d /usr/include/c10/cuda ]; then
  echo "skip: no NCCL or c10/cuda headers on this machine"
  exit 77
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
grep -q "SLAPO_DIST_BACKEND='mpi' is not a backend (choices: auto, gloo, nccl)" <<<"$mpi" || { echo "mpi: $mpi"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/c10/cuda/impl"
echo "#pragma once" >"$tmp/c10/cuda/impl/cuda_cmake_macros.h"
# syntax_check <object> <source>: compile <source> with <object>'s flags plus the CUDA defines
syntax_check() {
  local cmd
  cmd=$(cd "$build" && ninja -t commands "CMakeFiles/slapo_core.dir/$1" | grep -F "$1" | tail -1)
  cmd=$(echo "$cmd" | sed 's/ -o [^ ]*\.cpp\.o / /; s/ -c [^ ]*\.cpp/ -c '"${2//\//\\/}"'/; s/-include [^ ]*cmake_pch\.hxx//; s/-Winvalid-pch//; s/^.*ccache //')
  (cd "$build" && eval "$cmd -fsyntax-only -DSLAPO_WITH_TORCH_CUDA=1 -DUSE_C10D_NCCL=1 -DSLAPO_CUDA_OPS=1 \
    -I/usr/local/cuda/include -I$tmp")
}
syntax_check src/distributed/world.cpp.o "$root/src/distributed/world.cpp"
syntax_check kernels/ops.cpp.o "$root/kernels/ops.cpp"
syntax_check kernels/ops.cpp.o "$root/kernels/cuda/torch_kernels.cpp"
version=$(awk '/define TORCH_VERSION_(MAJOR|MINOR)/ {printf "%s%s", sep, $3; sep="."}' /usr/include/torch/csrc/api/include/torch/version.h)
echo "the NCCL backend and the CUDA ops compile against LibTorch $version's headers"
