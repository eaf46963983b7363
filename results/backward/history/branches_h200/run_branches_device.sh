#!/usr/bin/env bash
# grad_hidden's branches concurrent (RunOptions::concurrent_branches) on the lent H200, one call of ~5 minutes.
# Binaries: KINDEX_CUDA_ARCHS=90a scripts/device-build.sh br test_gpu bench_backward kindex_shared, packed as
#   tar cf - .devcarry/br | xz -T2 -6 > .devcarry/pack/br.tar.xz    (carried: .devcarry/pack)
#   1. test_gpu: the branch sum bit for bit; all 16 workloads against the CPU reference (1 round; the default plan,
#      now concurrent up to 1024 tokens, and the other branch plan among the variants); the bit-identity tests
#   2. bench_backward --variants: chained and concurrent interleaved per workload (wgmma recompute 8x8, v3), all 16
#   3. compute-sanitizer memcheck over the test on 1x131 (concurrent by default, chained among the variants)
set -u
[ -x .devcarry/br/bin/test_gpu ] || xz -dc .devcarry/pack/br.tar.xz | tar xf -
bin=.devcarry/br/bin
O=${OUT:?}
L=$(mktemp -d)
T0=$(date +%s)
stamp() { echo "[$(($(date +%s) - T0)) s] $*" | tee -a "$L/steps.txt"; }
cap() { local left=$((540 - ($(date +%s) - T0))); [ $left -lt 1 ] && left=1; echo $(($1 < left ? $1 : left)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader > "$L/device_env.txt" 2>&1
KINDEX_BACKWARD_ROUNDS=1 timeout $(cap 200) $bin/test_gpu --gtest_filter='*Backward*' > "$L/test_backward.txt" 2>&1
stamp "*Backward* tests rc=$?"
grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|Failure' "$L/test_backward.txt" | head -20
grep -c ' ok$' "$L/test_backward.txt" | sed 's/^/comparisons passed: /'
v=recompute:8:8:v3:8:wgmma:chained/recompute:8:8:v3:8:wgmma:concurrent
timeout $(cap 200) $bin/bench_backward --out "$L/bench_backward_branches.json" --iters 30 --warmup 5 --variants "$v" \
  > "$L/bench_backward_branches.txt" 2>&1
stamp "bench_backward variants rc=$?"
tail -3 "$L/bench_backward_branches.txt"
KINDEX_BACKWARD_CASES=1x131 KINDEX_BACKWARD_ROUNDS=1 timeout $(cap 120) compute-sanitizer --tool memcheck \
  --error-exitcode 9 $bin/test_gpu --gtest_filter='Sol/BackwardWorkload.*:Backward.BranchSum*' > "$L/memcheck.txt" 2>&1
stamp "memcheck 1x131 + branch sum rc=$?"
tail -2 "$L/memcheck.txt"
tar -C "$L" -czf "$O/branches.tar.gz" .
