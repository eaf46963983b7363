#!/usr/bin/env bash
# What the decode results in this folder were produced with, on the lent H200 (run from the repository root,
# binaries built here by `scripts/device-build.sh decode test_gpu bench_decode` and carried in .devcarry/decode/;
# logs and JSON written to $OUT).
#   results/decode/run_device.sh [tests] [tests_fallback] [sanitize] [bench] [bench_read] [torch]
# tests_fallback: the GPU tests again with solo pieces and the evict-first hint off (the knobs' other path).
# bench_read: the shipped variant with the cold-L2 flush done by READING a 2 x L2 buffer instead of zeroing one
# (diagnostic only: it shows what the flush's dirty lines cost; the protocol zeroes).
set -uo pipefail
bin=.devcarry/decode
out=${OUT:-/tmp/decode-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$out/bench.log"
for step in "$@"; do
  case $step in
    tests)
      timeout 200 $bin/test_gpu --gtest_filter='Decode.*' 2>&1 | tee "$out/tests.log" | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|Expected|Which is|pass the' ;;
    tests_fallback)
      KINDEX_DECODE_SOLO=0 KINDEX_DECODE_EVICT_FIRST=0 timeout 200 $bin/test_gpu --gtest_filter='Decode.*' 2>&1 | tee "$out/tests_fallback.log" | grep -E '^\[ *(FAILED|PASSED) *\]|Failure' ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $bin/test_gpu \
          --gtest_filter='Decode.SanitizerSmall:Decode.AllSequencesEmptyGiveZerosAndMinusInf:Decode.ManyShortSequencesAcrossTableBatches' > "$out/sanitizer_$tool.log" 2>&1
        echo "compute-sanitizer $tool exit $?"; tail -3 "$out/sanitizer_$tool.log"
      done ;;
    bench)
      timeout 300 $bin/bench_decode --json "$out/bench_decode.json" --dump-tables /tmp/decode-tables \
        --variants "${DECODE_VARIANTS:-s0m0p1}" --synthetic "${DECODE_SYNTHETIC:-}" 2>&1 | tee -a "$out/bench.log" ;;
    bench_read)
      timeout 120 $bin/bench_decode --json "$out/bench_read.json" --variants s0m0p1 --flush read > /dev/null 2>&1
      echo "bench_read exit $?" ;;
    torch)  # needs the bench step's tables and $bin/libkindex.so (device-build.sh decode ... kindex_shared)
      PYTHONUNBUFFERED=1 timeout 400 python3 bench/torch_decode_baselines.py --lib $bin/libkindex.so \
        --tables /tmp/decode-tables --out "$out/decode_vs_flashinfer.json" 2>&1 | tee "$out/torch.log" ;;
  esac
done
