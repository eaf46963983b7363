#!/usr/bin/env bash
# What the decode results in this folder are produced with, on the lent H200 (run from the repository root; binaries
# built here by `scripts/device-build.sh decode test_gpu bench_decode kindex_shared` and carried in
# .devcarry/decode/{bin,lib}; logs and JSON written to $OUT).
#   results/decode/run_device.sh [tests] [tests_all] [tests_ptx] [sanitize] [bench] [sweep] [bench_ptx] [ab] [peers] [ncu]
# sweep:     bench_decode on model-shaped synthetic cases (SWEEP_CASES, B:N:PS:HQ:HKV:D) at forced segment counts
#            (SWEEP_VARIANTS): the data the cost model's constants are read from.
# ncu:       NCU_WORKLOADS (default ps1#0 ps1#36 ps64#0), NCU_SECTIONS (default: speed of light, launch, occupancy,
#            warp states, scheduler; e.g. "--section WarpStateStats --section SourceCounters" for stall sites).
# bench_ptx: bench_decode of that compute_80-PTX-only build, JIT-compiled for this GPU: the portable path's speed.
# ab:        a restructuring's check: bench_decode of the previous binary (.devcarry/before/bin) and of this one,
#            interleaved twice with the same flags (benchmarks/gpu/decode_report.py --diff joins the four JSON files);
#            AB_BINARIES names other .devcarry/<tag> folders to interleave (e.g. "before decode plain").
# tests_ptx: the GPU decode tests on a build that carries only compute_80 PTX (.devcarry/decode-ptx), JIT-compiled
#            by the driver (CUDA_FORCE_PTX_JIT=1): the portable path, on this GPU.
# peers:     benchmarks/gpu/torch_decode_baselines.py: kindex (libkindex.so through its C ABI), FlashInfer's tensor-core and
#            CUDA-core decode, gathered SDPA and the reference, one process, the same inputs and page tables
#            (FlashInfer from wheels in .devcarry/flashinfer: `pip download flashinfer-python==0.7.2.post1` and its
#            dependency apache-tvm-ffi, or a build trimmed to its attention path; install.sh there).
set -uo pipefail
bin=.devcarry/decode/bin
out=${OUT:-/tmp/decode-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$out/device.txt"
for step in "$@"; do
  case $step in
    tests)
      timeout ${TESTS_TIMEOUT:-300} $bin/test_gpu --gtest_filter='Decode.*' 2>&1 | tee "$out/tests.log" |
        grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|Expected|Which is' ;;
    tests_all)  # every GPU test (the backward's at one round of fresh inputs)
      KINDEX_BACKWARD_ROUNDS=1 timeout ${TESTS_TIMEOUT:-300} $bin/test_gpu 2>&1 | tee "$out/tests_all.log" |
        grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure|Expected|Which is|tests ran' ;;
    tests_ptx)
      CUDA_FORCE_PTX_JIT=1 timeout 400 .devcarry/decode-ptx/bin/test_gpu --gtest_filter='Decode.*' 2>&1 |
        tee "$out/tests_ptx.log" | grep -E '^\[ *(FAILED|PASSED) *\]|Failure' ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $bin/test_gpu \
          --gtest_filter='Decode.SanitizerSmall:Decode.AllSequencesEmptyGiveZerosAndMinusInf:Decode.PlanOnceRunsEveryLayer' \
          > "$out/sanitizer_$tool.log" 2>&1
        echo "compute-sanitizer $tool exit $?"; tail -3 "$out/sanitizer_$tool.log"
      done ;;
    bench)
      timeout 300 $bin/bench_decode --json "$out/bench_decode.json" --dump-tables /tmp/decode-tables \
        --variants "${DECODE_VARIANTS:-s0,s0r1}" --synthetic "${DECODE_SYNTHETIC:-}" > "$out/bench_decode.txt" 2>&1
      echo "bench_decode exit $?"; tail -5 "$out/bench_decode.txt" ;;
    sweep)  # the cost model's constants: model-shaped synthetic cases at forced segment counts (s0: the model)
      timeout 240 $bin/bench_decode --filter syn --json "$out/sweep.json" --iters 20 \
        --synthetic "${SWEEP_CASES:-1:256:16:8:1:128,1:2048:16:8:1:128,1:8192:16:8:1:128,4:8192:16:8:1:128,1:2048:16:32:8:128,1:2048:16:16:8:256,8:4096:16:16:8:256,64:8192:16:32:8:128,256:16384:16:32:8:128,16:32768:1:32:8:128,1:32768:1:4:1:64}" \
        --variants "${SWEEP_VARIANTS:-s0,s0r1,s1,s2,s4,s8,s16,s33,s66,s132}" > "$out/sweep.txt" 2>&1
      echo "sweep exit $?"; tail -14 "$out/sweep.txt" ;;
    bench_ptx)
      CUDA_FORCE_PTX_JIT=1 timeout 300 .devcarry/decode-ptx/bin/bench_decode --json "$out/bench_decode_ptx.json" \
        --variants s0 > "$out/bench_decode_ptx.txt" 2>&1
      echo "bench_decode (compute_80 PTX) exit $?"; tail -3 "$out/bench_decode_ptx.txt" ;;
    ab)
      for i in 1 2; do
        for v in ${AB_BINARIES:-before decode}; do
          timeout 150 .devcarry/$v/bin/bench_decode --json "$out/ab_${v}_$i.json" --variants s0 \
            > "$out/ab_${v}_$i.txt" 2>&1
          echo "ab $v $i exit $?"
        done
      done ;;
    peers)
      [ -d /tmp/fisite ] || bash .devcarry/flashinfer/install.sh > "$out/flashinfer_setup.log" 2>&1
      # shellcheck disable=SC1091
      source /tmp/fisite/env.sh
      PYTHONUNBUFFERED=1 timeout ${PEERS_TIMEOUT:-420} python3 benchmarks/gpu/torch_decode_baselines.py \
        --lib "${PEERS_LIB:-.devcarry/decode/lib/libkindex.so}" --tables /tmp/decode-tables \
        --out "$out/decode_peers${PEERS_TAG:-}.json" ${PEERS_ARGS:-} > "$out/peers${PEERS_TAG:-}.log" 2>&1
      echo "peers exit $?"; tail -8 "$out/peers${PEERS_TAG:-}.log" ;;
    ncu)
      for w in ${NCU_WORKLOADS:-ps1#0 ps1#36 ps64#0}; do
        timeout 120 ncu --clock-control none --kernel-name regex:decode_kernel --launch-skip 20 --launch-count 1 \
          ${NCU_SECTIONS:---section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
          --section SchedulerStats} $bin/bench_decode --filter "$w" --iters 25 > "$out/ncu_${w//#/_}.txt" 2>&1
        echo "ncu $w exit $?"
      done ;;
  esac
done
