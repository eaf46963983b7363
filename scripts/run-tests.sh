#!/usr/bin/env bash
# The test suite: build, run every test under ctest (GPU-labelled tests skip without a device), then build the
# libFuzzer targets with clang and run each briefly.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache hits across checkouts (.ci/run builds a fresh clone in a temporary folder): hash paths relative to the
# source root.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
bash scripts/build.sh
jobs=$(nproc)
(cd build && ctest --output-on-failure -j "$jobs" --timeout 900)
if ls fuzz/*.cmake >/dev/null 2>&1; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DKINDEX_CUDA=OFF -DKINDEX_FUZZ=ON -DKINDEX_POSTGRES=OFF \
    -DBUILD_TESTING=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j "$jobs" --target kindex_fuzz_targets
  (cd build-fuzz && ctest --output-on-failure -L fuzz --timeout 300)
fi
