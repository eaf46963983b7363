#!/usr/bin/env bash
# The 8-warp wgmma grad_q pass with 3 cp.async stages (RowLayout::kStages) against the 2-stage build, and the
# shared C ABI error path (capi::guarded), on the lent H200: one call of ~5 minutes.
# Binaries: KINDEX_CUDA_ARCHS=90a scripts/device-build.sh onepath test_gpu bench_backward bench_decode kindex_shared
# (the commit before the stage change) and ... stage3 test_gpu bench_backward kindex_shared (with it), packed as
#   tar cf - .devcarry/onepath .devcarry/stage3 | xz -T2 -6 > .devcarry/pack/stage3.tar.xz   (carried: .devcarry/pack)
#   1. both builds' test_gpu: the backward tests (1 round, all 16 workloads against the CPU reference, every variant)
#      and the decode tests that check error statuses and messages (the shared error path)
#   2. compute-sanitizer memcheck and racecheck over the 3-stage wgmma grad_q pass (both schedules, 1x131, 1x256)
#   3. bench_backward (default plan, all 16 workloads, 30 iterations) alternating old, new, old, new
set -u
[ -x .devcarry/stage3/bin/test_gpu ] || xz -dc .devcarry/pack/stage3.tar.xz | tar xf -
old=.devcarry/onepath/bin new=.devcarry/stage3/bin
O=${OUT:?}
L=$(mktemp -d)
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$L/steps.txt"; }
cap() { local left=$((540 - ($(date +%s) - T0))); [ $left -lt 1 ] && left=1; echo $(($1 < left ? $1 : left)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader > "$L/device_env.txt" 2>&1
f='*Backward*:Decode.*Bad*:Decode.Validation*:Decode.EveryUpstreamDefinitionSmall:Decode.CudaGraph*'
KINDEX_BACKWARD_ROUNDS=1 timeout $(cap 150) $new/test_gpu --gtest_filter="$f" > "$L/test_new.txt" 2>&1
stamp "new: tests rc=$?"
grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure' "$L/test_new.txt" | head -20
grep -c ' ok$' "$L/test_new.txt" | sed 's/^/comparisons passed: /'
for s in recompute_dp store_dp; do
  timeout $(cap 60) compute-sanitizer --tool racecheck --error-exitcode 9 $new/bench_backward --attention-only \
    --kernels wgmma --tiling 8,8 --cases 1x131,1x256 --iters 1 --warmup 0 --schedule $s > "$L/racecheck_$s.txt" 2>&1
  stamp "racecheck 3-stage grad_q $s rc=$?"
  tail -1 "$L/racecheck_$s.txt"
  timeout $(cap 60) compute-sanitizer --tool memcheck --error-exitcode 9 $new/bench_backward --attention-only \
    --kernels wgmma --tiling 8,8 --cases 1x131,1x256,2x1024 --iters 1 --warmup 0 --schedule $s > "$L/memcheck_$s.txt" 2>&1
  stamp "memcheck 3-stage grad_q $s rc=$?"
  tail -1 "$L/memcheck_$s.txt"
done
for r in 1 2; do
  for which in old new; do
    b=$old; [ $which = new ] && b=$new
    timeout $(cap 90) $b/bench_backward --out "$L/bench_${which}_$r.json" --iters 30 --warmup 5 > "$L/bench_${which}_$r.txt" 2>&1
    stamp "bench $which run $r rc=$?"
    grep -E "mean S|geomean" "$L/bench_${which}_$r.txt" | tail -2
  done
done
tar -C "$L" -czf "$O/stage3.tar.gz" .
