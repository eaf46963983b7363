#!/usr/bin/env bash
# Installs the Debian dependencies (once) and builds kindex into build/ (CUDA kernels too where nvcc exists).
# Extra arguments go to CMake's configure step, e.g. -DKINDEX_CUDA_ARCHS="80;90a;100a".
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across checkouts (CI builds a fresh clone): hash paths relative to the source root.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
bash scripts/install-deps.sh
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j "$jobs"
