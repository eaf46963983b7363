#!/usr/bin/env bash
# `pip install .` from this checkout with CUDA off (what a machine without nvcc gets), into a scratch folder, then
# the CPU tests against the installed package: the build backend, the CMake install rules and the packaged
# libkindex.so, end to end. Needs scikit-build-core and pytest (scripts/install-deps.sh). Run by ctest with the
# interpreter CMake found as its argument (default: python3).
set -euo pipefail
python=${1:-python3}
repo=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=1
"$python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --target "$scratch/site" \
  -C cmake.define.KINDEX_CUDA=OFF -C build-dir="$scratch/build" "$repo"
test -f "$scratch/site/kindex/libkindex.so" || { echo "pip install: no kindex/libkindex.so installed" >&2; exit 1; }
cd "$scratch"
env -u KINDEX_LIBRARY KINDEX_TEST_INSTALLED=1 PYTHONPATH="$scratch/site:$repo/python/tests" \
  "$python" -m pytest -q -p no:cacheprovider "$repo/python/tests/test_cpu.py"
