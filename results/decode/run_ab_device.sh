#!/usr/bin/env bash
# A/B of two bench_decode builds on one GPU in one call (from the repository root): the carried old binary
# (OLD, default .devcarry/bench_decode_old.xz, xz-packed) against the new one in .devcarry/bins.tar.xz (extracted by
# run_v6_device.sh), alternating old/new per round so drift hits both. Cases CASES (bench_decode --synthetic),
# variants VARIANTS, ROUNDS rounds; $OUT/ab.tar.xz holds each round's JSON and text.
set -uo pipefail
final=${OUT:?}
w=/tmp/ab; mkdir -p $w/old
xz -dc "${OLD:-.devcarry/bench_decode_old.xz}" > $w/old/bench_decode && chmod +x $w/old/bench_decode || exit 9
[ -x .devcarry/decode/bin/bench_decode ] || tar xJf .devcarry/bins.tar.xz -C .devcarry || exit 9
cases=${CASES:-1:256:16:8:1:128,4:32:16:10:2:128,1:2048:16:8:1:128,16:1024:64:16:8:128}
for r in $(seq 1 "${ROUNDS:-1}"); do
  for b in old new; do
    bin=$w/old/bench_decode; [ $b = new ] && bin=.devcarry/decode/bin/bench_decode
    timeout "${AB_TIMEOUT:-60}" $bin --filter syn --synthetic "$cases" --variants "${VARIANTS:-s0r1,s0,s16r1}" \
      --iters "${ITERS:-20}" --json $w/ab_${b}_$r.json > $w/ab_${b}_$r.txt 2>&1
    echo "$b round $r exit $?"; cut -c1-200 $w/ab_${b}_$r.txt | grep -v "^wrote"
  done
done
tar cJf "$final/ab.tar.xz" -C $w --exclude old .
