#!/usr/bin/env bash
# Installs the Debian dependencies (once) and builds kindex into build/ (CUDA kernels too where nvcc exists).
# Extra arguments go to CMake's configure step, e.g. -DKINDEX_CUDA_ARCHS=90a; so does KINDEX_CUDA_ARCHS from the
# environment (CI builds one architecture: .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across checkouts (CI builds a fresh clone): hash paths relative to the source root.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
bash scripts/install-deps.sh
jobs=$(nproc)
archs=()
[ -n "${KINDEX_CUDA_ARCHS:-}" ] && archs=(-DKINDEX_CUDA_ARCHS="$KINDEX_CUDA_ARCHS")
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${archs[@]}" "$@" >/dev/null
cmake --build build -j "$jobs"
