#!/usr/bin/env bash
# The main job: build, then run `kindex` on the bundled problems (benchmarks the kernels on a CUDA machine;
# without a GPU it runs the CPU path on the small workloads) and print the results table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/bin/kindex "$@"
