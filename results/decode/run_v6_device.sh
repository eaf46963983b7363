#!/usr/bin/env bash
# The v6 device call (2026-12-07), from the repository root: every GPU test, the segment-count sweep,
# compute-sanitizer, then the model-shaped suite and the seeds against the peers (last: it resumes in a later call).
# Binaries: scripts/device-build.sh decode test_gpu bench_decode kindex_shared (KINDEX_CUDA_ARCHS=90a), packed as
# .devcarry/bins.tar.xz; datasets exported by `kindex catalog export [--dataset definitions/model_suite] --out
# .devcarry/suite/<name>`; peers as benchmarks/gpu/run_decode_suite_device.sh says. Each stage's files are packed into
# $OUT/<stage>.tar.xz (a call returns at most 8 files). STAGES picks and orders them (default: tests sweep sanitize
# suite; tests_decode runs the decode GPU tests alone; ncu profiles NCU_CASES at NCU_VARIANT, default s0, with
# NCU_EXTRA's ncu arguments); TESTS_TIMEOUT, SWEEP_TIMEOUT, SAN_TIMEOUT, NCU_TIMEOUT, TIMEOUT_MAIN bound them, SAN_FILTER picks the sanitizers' tests.
set -uo pipefail
final=${OUT:?}
tar xJf .devcarry/bins.tar.xz -C .devcarry || exit 9
bin=.devcarry/decode/bin
stage() { tar cJf "$final/$1.tar.xz" -C "$2" .; }
for s in ${STAGES:-tests sweep sanitize suite}; do
  w=/tmp/v6-$s; mkdir -p $w
  case $s in
    tests) OUT=$w TESTS_TIMEOUT=${TESTS_TIMEOUT:-200} bash results/decode/run_device.sh tests_all 2>&1 | tail -25 ;;
    tests_decode)  # the decode GPU tests alone (~35 s)
      timeout ${TESTS_TIMEOUT:-200} $bin/test_gpu --gtest_filter='Decode.*' > "$w/tests_decode.log" 2>&1
      echo "test_gpu Decode.* exit $?"; grep -E '^\[  (PASSED|FAILED) ' "$w/tests_decode.log" ;;
    sweep) OUT=$w timeout ${SWEEP_TIMEOUT:-120} bash results/decode/run_device.sh sweep 2>&1 | tail -14 ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout ${SAN_TIMEOUT:-70} compute-sanitizer --tool $tool --error-exitcode 9 $bin/test_gpu \
          --gtest_filter="${SAN_FILTER:-Decode.SanitizerSmall:Decode.AllSequencesEmptyGiveZerosAndMinusInf:Decode.PlanOnceRunsEveryLayer}" \
          > "$w/sanitizer_$tool.log" 2>&1
        echo "compute-sanitizer $tool exit $?"; tail -2 "$w/sanitizer_$tool.log"
      done ;;
    ncu)  # profiles of the plan and run kernels on synthetic cases (bench_decode B:N:PS:HQ:HKV:D), one run each
      for c in ${NCU_CASES:-4:32:16:10:2:128 16:1024:64:16:8:128}; do
        timeout ${NCU_TIMEOUT:-90} ncu --clock-control none --kernel-name 'regex:plan_kernel|decode_kernel' \
          --launch-skip 10 --launch-count 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
          --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats ${NCU_EXTRA:-} \
          $bin/bench_decode --filter syn --synthetic "$c" --variants ${NCU_VARIANT:-s0} --iters 12 > "$w/ncu_${c//:/_}_${NCU_VARIANT:-s0}.txt" 2>&1
        echo "ncu $c exit $?"; grep -E "Duration|DRAM Throughput|Memory Throughput" "$w/ncu_${c//:/_}_${NCU_VARIANT:-s0}.txt" | head -6
      done ;;
    suite)
      OUT=$w DATASETS="${DATASETS:-.devcarry/suite/models_a .devcarry/suite/seeds}" \
        IMPLS=${IMPLS:-kindex,flashinfer_tc,flashinfer_cuda,flashinfer_xqa,fa3} QUICK=${QUICK:-1} \
        TIMEOUT_MAIN=${TIMEOUT_MAIN:-270} bash benchmarks/gpu/run_decode_suite_device.sh 2>&1 | tail -24 ;;
  esac
  stage "$s" $w
done
