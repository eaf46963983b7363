#!/usr/bin/env bash
# The runner on the lent GPU: its GPU tests (the device input generator against the host's bits, the timer) and the
# main job as a new user runs it (`kindex` with no arguments, in an empty folder), timed (wall, user, sys).
# Binaries: `KINDEX_CUDA_ARCHS=90a scripts/device-build.sh main test_gpu kindex_cli kindex_shared
# kindex_gpu_reference_shared`, carried in .devcarry/main. Output: $OUT (tests_runner.log, main_job.txt, its stderr
# and time, the main job's results.json).
set -uo pipefail
d=$(realpath .devcarry/main)
out=${OUT:-/tmp/main-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$out/device.txt"
nproc >> "$out/device.txt"
timeout "${TESTS_TIMEOUT:-150}" "$d/bin/test_gpu" --gtest_filter="${RUNNER_TESTS:-RandomFill.*:BenchTiming.*}" \
  > "$out/tests_runner.log" 2>&1
echo "runner GPU tests exit $?"; grep -E '^\[ *(FAILED|PASSED) *\]|tests ran' "$out/tests_runner.log"
work=$(mktemp -d)
cd "$work" || exit 1
TIMEFORMAT='wall %R s, user %U s, sys %S s'
{ time timeout "${MAIN_TIMEOUT:-300}" "$d/bin/kindex" > "$out/main_job.txt" 2> "$out/main_job.stderr"; } 2> "$out/main_job_time.txt"
echo "main job exit $? ($(cat "$out/main_job_time.txt"))"
cp kindex-results/results.json "$out/main_job_results.json" 2>/dev/null
tail -n 12 "$out/main_job.txt"
