#!/usr/bin/env bash
# Final device call of 2026-12-02 (session 2): kindex bench over ps64 and L2/003 (ps1 ran in the previous call),
# the C ABI example, a decode A/B of the evict-first copy hint over the 68 seed workloads, and compute-sanitizer on
# the v4 backward. Everything is packed into one tarball under $OUT (the device returns at most 8 files).
#   binaries: scripts/device-build.sh final kindex_cli kindex_shared paged_decode_example bench_decode bench_backward test_gpu
set -u
C=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d); tar -C $D -xzf $C/bin.tar.gz; cp -r $C/lib $D/
export LD_LIBRARY_PATH=$D:$D/lib:${LD_LIBRARY_PATH:-}
R=$(mktemp -d)/final; mkdir -p $R
T0=$(date +%s); deadline=$(( T0 + ${BUDGET_S:-470} ))
pack() { tar -C $(dirname $R) -czf $OUT/final.tar.gz final; cp $R/steps.txt $OUT/steps.txt; }
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/steps.txt; pack; }
trap pack EXIT
nvidia-smi > $R/smi.txt 2>&1
( cd $D && ./paged_decode_example ) > $R/example.log 2>&1; stamp "example rc=$?"
STORE=sqlite:$R/kindex.db
stage() { local name=$1 limit=$2; shift 2
  timeout $limit $D/kindex bench "$@" --impl kindex --impl gpu-reference --reference gpu-reference \
     --out $R/$name --store $STORE > $R/$name.table.txt 2> $R/$name.stderr.txt
  stamp "bench $name rc=$?"
}
stage ps64 170 --problem gqa_paged_decode_h24_kv4_d128_ps64
stage l2_003 200 --problem 003_grouped_query_attention_with_rope_backward
left() { echo $(( deadline - $(date +%s) )); }
timeout $(( $(left) > 60 ? 60 : $(left) )) $D/bench_decode --json $R/decode_ab.json --variants s0m0p1,s0m0p1e0 > $R/decode_ab.txt 2>&1
stamp "decode A/B rc=$?"
KINDEX_BACKWARD_CASES=1x131,1x128 KINDEX_BACKWARD_ROUNDS=1 timeout $(( $(left) > 90 ? 90 : $(left) )) compute-sanitizer \
  --tool memcheck --error-exitcode 9 $D/test_gpu --gtest_filter='Sol/BackwardWorkload.*:Backward.GraphReplay*' \
  > $R/backward_memcheck.txt 2>&1
stamp "backward memcheck rc=$?"
timeout $(( $(left) > 30 ? 30 : $(left) )) compute-sanitizer --tool racecheck --error-exitcode 9 $D/bench_backward \
  --attention-only --cases 1x131 --iters 1 --warmup 0 --schedule store_dp > $R/backward_racecheck.txt 2>&1
stamp "backward racecheck rc=$?"
