# Shared by scripts/run and scripts/test: set up (apt), configure and build into build/ (scripts/run
# builds only the program; scripts/test everything, the C++ test binary included).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${SLAPO_BUILD_DIR:-$root/build}"

"$root/scripts/setup"

export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
# paths relative to the checkout, so a fresh clone elsewhere reuses the cache (-g records the directory)
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
# Each torch-including file takes ~1.5 GB to compile; two jobs fit the 2-core, 24 GB machines.
# build_targets (set before sourcing this file): what the caller needs; empty: everything.
cmake --build "$build_dir" -j "${SLAPO_JOBS:-2}" ${build_targets:+--target $build_targets}
