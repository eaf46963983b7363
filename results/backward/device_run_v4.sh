#!/usr/bin/env bash
# Device call 2 of v4 (final): variant sweep, full benchmarks of the candidate defaults, the GPU tests (2 rounds for
# the > 1024-token workloads, 10 for the others; every round also checks the unsplit dK/dV sums against the CPU
# reference, the first also splits <= 2 and <= 4), compute-sanitizer memcheck and racecheck. Every step time-boxed;
# logs under $OUT.
set -u
D=$(cd "$(dirname "$0")" && pwd); O=${OUT:?}
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*" >> "$O/steps.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader \
  > "$O/device_env.txt" 2>&1
stamp start
V="store:4:4:v3:1/store:4:4:v3:8/store:4:4:value:8/store:4:4:rows:1/store:4:4:rows:2/store:4:4:rows:4"
V="$V/store:4:4:rows:8/recompute:4:4:rows:8/store:8:8:rows:8"
timeout 60 "$D/bench_backward" --variants "$V" --iters 30 --warmup 5 --out "$O/sweep.json" > "$O/sweep.txt" 2>&1
stamp "sweep rc=$?"
timeout 40 "$D/bench_backward" --out "$O/bench_backward.json" > "$O/bench_backward.txt" 2>&1
stamp "bench default rc=$?"
timeout 40 "$D/bench_backward" --max-splits 4 --out "$O/bench_cap4.json" > "$O/bench_cap4.txt" 2>&1
stamp "bench cap4 rc=$?"
timeout 40 "$D/bench_backward" --plan v3 --max-splits 8 --out "$O/bench_v3plan.json" > "$O/bench_v3plan.txt" 2>&1
stamp "bench v3plan rc=$?"
timeout 40 "$D/bench_backward" --plan v3 --max-splits 1 --out "$O/bench_v3cfg.json" > "$O/bench_v3cfg.txt" 2>&1
stamp "bench v3cfg rc=$?"
SMALL=1x691,2x449,2x128,1x1024,1x131,1x293,1x128,1x512,1x256
LARGE=16x256,1x2048,16x128,4x1024,8x384,2x1024,4x512
KINDEX_BACKWARD_CASES=$LARGE timeout 110 "$D/test_gpu" --gtest_filter='*Backward*' > "$O/test_large.txt" 2>&1
stamp "tests large (2 rounds) + other tests rc=$?"
KINDEX_BACKWARD_CASES=1x131 KINDEX_BACKWARD_ROUNDS=1 timeout 45 compute-sanitizer --tool memcheck \
  "$D/test_gpu" --gtest_filter='Sol/BackwardWorkload.*:Backward.GraphReplay*' > "$O/memcheck.txt" 2>&1
stamp "memcheck rc=$?"
for s in store_dp recompute_dp; do
  timeout 15 compute-sanitizer --tool racecheck "$D/bench_backward" --attention-only --cases 1x131 --iters 1 \
    --warmup 0 --schedule $s > "$O/racecheck_$s.txt" 2>&1
  stamp "racecheck $s rc=$?"
done
KINDEX_BACKWARD_CASES=$SMALL timeout 150 "$D/test_gpu" --gtest_filter='Sol/BackwardWorkload.*' \
  > "$O/test_small.txt" 2>&1
stamp "tests small (10 rounds) rc=$?"
