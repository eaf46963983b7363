#!/usr/bin/env bash
# The v6 device call (2026-12-07), from the repository root: the GPU decode tests, the model-shaped suite and the
# seeds against the peers, compute-sanitizer, the segment-count sweep. Binaries: scripts/device-build.sh decode
# test_gpu bench_decode kindex_shared (KINDEX_CUDA_ARCHS=90a), packed as .devcarry/bins.tar.xz; datasets exported by
# `kindex catalog export [--dataset definitions/model_suite] --out .devcarry/suite/<name>`; peers as
# benchmarks/gpu/run_decode_suite_device.sh says. Each stage's files are packed into $OUT/stageN.tar.xz (a call
# returns at most 8 files).
set -uo pipefail
final=${OUT:?}
tar xJf .devcarry/bins.tar.xz -C .devcarry || exit 9
bin=.devcarry/decode/bin
stage() { tar cJf "$final/$1.tar.xz" -C "$2" .; }
w=/tmp/v6-tests; mkdir -p $w
OUT=$w bash results/decode/run_device.sh tests 2>&1 | tail -25
stage stage1 $w
w=/tmp/v6-suite; mkdir -p $w
OUT=$w DATASETS="${DATASETS:-.devcarry/suite/models_a .devcarry/suite/seeds}" \
  IMPLS=${IMPLS:-kindex,flashinfer_tc,flashinfer_cuda,flashinfer_xqa,fa3} QUICK=${QUICK:-1} \
  TIMEOUT_MAIN=${TIMEOUT_MAIN:-270} bash benchmarks/gpu/run_decode_suite_device.sh 2>&1 | tail -24
stage stage2 $w
w=/tmp/v6-sanitize; mkdir -p $w
for tool in memcheck racecheck; do
  timeout ${SAN_TIMEOUT:-70} compute-sanitizer --tool $tool --error-exitcode 9 $bin/test_gpu \
    --gtest_filter='Decode.SanitizerSmall:Decode.AllSequencesEmptyGiveZerosAndMinusInf:Decode.PlanOnceRunsEveryLayer' \
    > "$w/sanitizer_$tool.log" 2>&1
  echo "compute-sanitizer $tool exit $?"; tail -2 "$w/sanitizer_$tool.log"
done
stage stage3 $w
w=/tmp/v6-sweep; mkdir -p $w
OUT=$w timeout ${SWEEP_TIMEOUT:-120} bash results/decode/run_device.sh sweep 2>&1 | tail -14
stage stage4 $w
