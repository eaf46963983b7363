#!/usr/bin/env bash
# v5 (wgmma) device call, from the repository root on the lent H200, binaries built here by
#   KINDEX_CUDA_ARCHS=90a scripts/device-build.sh backward test_gpu bench_backward
#   tar -C .devcarry -czf .devcarry/backward.tar.gz backward     # 67 MB of binaries -> 20 MB: fits the carry limit
# and carried as .devcarry/backward.tar.gz (unpacked here into .devcarry/backward/{bin,lib}) or, where it fits,
# as .devcarry/backward itself. One call, ~4-6 minutes (at most 9: every step is capped); every log goes into ONE
# tarball under $OUT (plus steps.txt, the exit status of each step):
#   1. test_gpu Wgmma.*: the building blocks on their own (one tile per operand form, exact against a CPU product)
#   2. test_gpu *Backward*: all 16 workloads against the CPU reference, one round (seed 200), every variant the test
#      runs (mma_sync default and unsplit; wgmma default, unsplit, recompute_dp, a second call); the bit-identity
#      tests of both kernel families; graph replay; bad params
#   3. bench_backward --variants: mma_sync and wgmma interleaved per workload in one process (whole call and
#      attention only), both schedules, wgmma with one and with two warpgroups per CTA
#   4. compute-sanitizer memcheck over the wgmma tile tests and 1x131 (odd S padding, split dK/dV path, every
#      variant of the test), and over the wgmma attention kernels alone on 1x256 (split) and 2x1024 (unsplit),
#      tilings 4,4 and 8,8
#   5. compute-sanitizer racecheck over the attention kernels alone (bench_backward --attention-only), wgmma, both
#      schedules, 1x131 and 1x256 with tiling 4,4, 1x131 with 8,8
set -u
bin=.devcarry/backward/bin
if [ ! -x $bin/test_gpu ] && [ -f .devcarry/backward.tar.gz ]; then tar -C .devcarry -xzf .devcarry/backward.tar.gz; fi
source results/device_steps.sh
stamp start

timeout $(cap 30) $bin/test_gpu --gtest_filter='Wgmma.*' > "$L/test_wgmma.txt" 2>&1
stamp "Wgmma.* building blocks rc=$?"
grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|Failure|mismatch|Expected' "$L/test_wgmma.txt" | head -20

KINDEX_BACKWARD_ROUNDS=1 timeout $(cap 150) $bin/test_gpu --gtest_filter='*Backward*' > "$L/test_backward.txt" 2>&1
stamp "*Backward* tests, 1 round, all variants rc=$?"
grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure' "$L/test_backward.txt" | head -20
grep -c ' ok$' "$L/test_backward.txt" | sed 's/^/comparisons passed: /'

variants=store:4:4:v3:8:mma_sync/store:4:4:v3:8:wgmma/recompute:4:4:v3:8:wgmma/store:8:8:v3:8:wgmma
variants=$variants/recompute:8:8:v3:8:wgmma/recompute:4:4:v3:8:mma_sync
timeout $(cap 120) $bin/bench_backward --out "$L/bench_backward_v5_variants.json" --iters 30 --warmup 5 \
  --variants "$variants" > "$L/bench_backward_v5_variants.txt" 2>&1
stamp "bench_backward variants rc=$?"
tail -6 "$L/bench_backward_v5_variants.txt"

KINDEX_BACKWARD_CASES=1x131 KINDEX_BACKWARD_ROUNDS=1 timeout $(cap 90) compute-sanitizer --tool memcheck \
  --error-exitcode 9 $bin/test_gpu --gtest_filter='Wgmma.*:Sol/BackwardWorkload.*' > "$L/memcheck_tests.txt" 2>&1
stamp "memcheck Wgmma.* + 1x131 all variants rc=$?"
tail -2 "$L/memcheck_tests.txt"
for s in store_dp recompute_dp; do
  for tiling in 4,4 8,8; do
    log="$L/memcheck_wgmma_${tiling/,/x}_$s.txt"
    timeout $(cap 45) compute-sanitizer --tool memcheck --error-exitcode 9 $bin/bench_backward --attention-only \
      --kernels wgmma --tiling $tiling --cases 1x256,2x1024 --iters 1 --warmup 0 --schedule $s > "$log" 2>&1
    stamp "memcheck wgmma attention 1x256 (split) 2x1024 (unsplit) tiling $tiling $s rc=$?"
    tail -1 "$log"
  done
done

for run in 1x131:4,4 1x256:4,4 1x131:8,8; do
  c=${run%%:*} tiling=${run#*:}
  for s in store_dp recompute_dp; do
    log="$L/racecheck_wgmma_${c}_${tiling/,/x}_$s.txt"
    timeout $(cap 30) compute-sanitizer --tool racecheck --error-exitcode 9 $bin/bench_backward --attention-only \
      --kernels wgmma --tiling "$tiling" --cases "$c" --iters 1 --warmup 0 --schedule $s > "$log" 2>&1
    stamp "racecheck wgmma $c tiling $tiling $s rc=$?"
    tail -1 "$log"
  done
done

tar -C "$L" -czf "$O/backward_v5_device.tar.gz" .
cp "$L/steps.txt" "$O/steps.txt"
