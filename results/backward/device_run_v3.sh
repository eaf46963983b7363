#!/usr/bin/env bash
# One device call for the backward (v3): tests, benchmark, sanitizers; every step time-boxed, logs under $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd); O=${OUT:?}
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*" >> "$O/steps.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader \
  > "$O/device_env.txt" 2>&1
stamp start
KINDEX_BACKWARD_ROUNDS=1 timeout 105 "$D/test_gpu" --gtest_filter='*Backward*' > "$O/test_log.txt" 2>&1
stamp "tests rc=$?"
timeout 60 "$D/bench_backward" --out "$O/bench_backward.json" > "$O/bench_backward.txt" 2>&1
stamp "bench rc=$?"
KINDEX_BACKWARD_CASES=1x131 KINDEX_BACKWARD_ROUNDS=1 timeout 35 compute-sanitizer --tool memcheck \
  "$D/test_gpu" --gtest_filter='Sol/BackwardWorkload.*:Backward.GraphReplay*' > "$O/memcheck.txt" 2>&1
stamp "memcheck rc=$?"
for s in store_dp recompute_dp; do
  timeout 12 compute-sanitizer --tool racecheck "$D/bench_backward" --attention-only --cases 1x131 --iters 1 \
    --warmup 0 --schedule $s > "$O/racecheck_$s.txt" 2>&1
  stamp "racecheck $s rc=$?"
done
