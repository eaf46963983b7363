#!/usr/bin/env bash
# What the decode results in this folder were produced with, on the lent H200 (run from the repository root,
# binaries built here by the decode build and carried in .devcarry/decode/; logs and JSON written to $OUT).
#   results/decode/run_device.sh [tests] [sanitize] [bench] [torch]
set -uo pipefail
bin=.devcarry/decode
out=${OUT:-/tmp/decode-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$out/device.txt"
for step in "$@"; do
  case $step in
    tests)
      timeout 300 $bin/test_decode_gpu --gtest_filter='Decode.*' 2>&1 | tee "$out/tests.log" | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) *\]|Failure|Expected|Which is|pass the' ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $bin/test_decode_gpu \
          --gtest_filter='Decode.SanitizerSmall:Decode.AllSequencesEmptyGiveZerosAndMinusInf' > "$out/sanitizer_$tool.log" 2>&1
        echo "compute-sanitizer $tool exit $?"; tail -3 "$out/sanitizer_$tool.log"
      done ;;
    bench)
      timeout 300 $bin/bench_decode --json "$out/bench_decode.json" --dump-tables /tmp/decode-tables \
        --variants "${DECODE_VARIANTS:-s0m0p1}" 2>&1 | tee "$out/bench.log" ;;
    torch)
      PYTHONUNBUFFERED=1 timeout 400 python3 bench/torch_decode_baselines.py --kindex "$out/bench_decode.json" \
        --tables /tmp/decode-tables --out "$out/torch_baselines.json" --combined "$out/bench_combined.json" 2>&1 | tee "$out/torch.log" ;;
  esac
done
