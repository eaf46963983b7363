#!/usr/bin/env bash
# grad_o_weight deferred behind dO (RunOptions::defer_grad_o_weight) on the lent H200, one call of ~3 minutes.
# Binaries: KINDEX_CUDA_ARCHS=90a scripts/device-build.sh late test_gpu bench_backward kindex_shared, packed as
#   tar cf - .devcarry/late | xz -T2 -6 > .devcarry/pack/late.tar.xz    (carried: .devcarry/pack)
#   1. test_gpu: the bit-identity tests (mma_sync and wgmma variant lists include the deferred plans)
#   2. bench_backward --variants: the default plan and three deferred plans interleaved per workload, all 16
set -u
[ -x .devcarry/late/bin/test_gpu ] || xz -dc .devcarry/pack/late.tar.xz | tar xf -
bin=.devcarry/late/bin
O=${OUT:?}
L=$(mktemp -d)
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$L/steps.txt"; }
cap() { local left=$((540 - ($(date +%s) - T0))); [ $left -lt 1 ] && left=1; echo $(($1 < left ? $1 : left)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader > "$L/device_env.txt" 2>&1
timeout $(cap 150) $bin/test_gpu --gtest_filter='Backward.*SchedulesAreBitIdentical:Backward.DefaultPlan*' > "$L/test_bit_identity.txt" 2>&1
stamp "bit-identity tests rc=$?"
grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) *\]' "$L/test_bit_identity.txt"
v=recompute:8:8:v3:8:wgmma/recompute:8:8:v3_late:8:wgmma/recompute:8:8:rows_late:8:wgmma/recompute:8:8:high_late:8:wgmma
timeout $(cap 300) $bin/bench_backward --out "$L/bench_backward_late_wo.json" --iters 30 --warmup 5 --variants "$v" \
  > "$L/bench_backward_late_wo.txt" 2>&1
stamp "bench_backward variants rc=$?"
tail -8 "$L/bench_backward_late_wo.txt"
tar -C "$L" -czf "$O/late_wo.tar.gz" .
