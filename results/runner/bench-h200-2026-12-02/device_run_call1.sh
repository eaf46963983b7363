#!/usr/bin/env bash
# Device call for issue #3: kindex bench over the three seed problems (kindex + GPU reference, judged against the
# GPU reference), all into one store; plus the README's C ABI example. Run from the repo root:
#   bash .devcarry/all/run.sh      (binaries: scripts/device-build.sh all kindex_cli kindex_shared paged_decode_example;
#                                   lib/ holds Debian's libcpp-httplib + brotli, absent on the device)
set -u
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$D:$D/lib:${LD_LIBRARY_PATH:-}
R=$OUT/runner; mkdir -p $R
deadline=$(( $(date +%s) + ${BUDGET_S:-560} ))
nvidia-smi > $R/smi.txt 2>&1
ldd $D/kindex > $R/ldd.txt 2>&1
( cd $D && ./paged_decode_example ) > $R/example.log 2>&1; echo "example rc=$?" >> $R/example.log
STORE=sqlite:$R/kindex.db
stage() { local name=$1; shift
  local t0=$(date +%s) left=$(( deadline - $(date +%s) ))
  echo "$name start $(date -u +%FT%TZ) limit=${left}s" >> $R/rc.txt
  timeout $left $D/kindex bench "$@" --impl kindex --impl gpu-reference --reference gpu-reference \
     --out $R/$name --store $STORE > $R/$name.table.txt 2> $R/$name.stderr.txt
  echo "$name rc=$? seconds=$(( $(date +%s) - t0 ))" >> $R/rc.txt
}
stage ps1 --problem gqa_paged_decode_h32_kv4_d128_ps1
stage ps64 --problem gqa_paged_decode_h24_kv4_d128_ps64
stage l2_003 --problem 003_grouped_query_attention_with_rope_backward
echo "end $(date -u +%FT%TZ)" >> $R/rc.txt
