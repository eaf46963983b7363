#!/usr/bin/env bash
# v4 verification call (NOT yet run: written after device call 2 lost its logs to the 8-file return limit): the
# committed defaults benchmarked (full JSON), the GPU tests (2 rounds > 1024 tokens, 10 rounds <= 1024), memcheck and
# racecheck; every log packed into ONE tarball so it comes back. ~4 minutes of device time.
set -u
D=$(cd "$(dirname "$0")" && pwd); O=${OUT:?}; L=$(mktemp -d)
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*" >> "$L/steps.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader \
  > "$L/device_env.txt" 2>&1
stamp start
timeout 40 "$D/bench_backward" --out "$L/bench_backward.json" > "$L/bench_backward.txt" 2>&1
stamp "bench rc=$?"
SMALL=1x691,2x449,2x128,1x1024,1x131,1x293,1x128,1x512,1x256
LARGE=16x256,1x2048,16x128,4x1024,8x384,2x1024,4x512
KINDEX_BACKWARD_CASES=$LARGE timeout 110 "$D/test_gpu" --gtest_filter='*Backward*' > "$L/test_large.txt" 2>&1
stamp "tests large (2 rounds) + other tests rc=$?"
KINDEX_BACKWARD_CASES=1x131,1x128 KINDEX_BACKWARD_ROUNDS=1 timeout 60 compute-sanitizer --tool memcheck \
  --error-exitcode 9 "$D/test_gpu" --gtest_filter='Sol/BackwardWorkload.*:Backward.GraphReplay*' > "$L/memcheck.txt" 2>&1
stamp "memcheck rc=$?"
for s in store_dp recompute_dp; do
  timeout 20 compute-sanitizer --tool racecheck --error-exitcode 9 "$D/bench_backward" --attention-only \
    --cases 1x131 --iters 1 --warmup 0 --schedule $s > "$L/racecheck_$s.txt" 2>&1
  stamp "racecheck $s rc=$?"
done
KINDEX_BACKWARD_CASES=$SMALL timeout 150 "$D/test_gpu" --gtest_filter='Sol/BackwardWorkload.*' \
  > "$L/test_small.txt" 2>&1
stamp "tests small (10 rounds) rc=$?"
tar -C "$L" -czf "$O/backward_v4_logs.tar.gz" .
cp "$L/steps.txt" "$O/steps.txt"
