#!/usr/bin/env bash
# v5 evidence for issue 13 in one device call (~6 minutes, every step capped), from the repository root on the lent
# H200. libkindex.so built here by
#   KINDEX_CUDA_ARCHS=90a scripts/device-build.sh prof kindex_shared
# and carried as .devcarry/prof (KINDEX_DEVCARRY overrides). Writes ONE tarball under $OUT (and steps.txt):
#   1. benchmarks/gpu/backward_vs_torch.py: kindex (the v5 default plan) against the definition's reference eager and
#      under torch.compile, same process, same inputs, cold L2, all 16 workloads, 3 correctness rounds
#   2. benchmarks/gpu/backward_timeline.py: the kernel timeline per stream of a cold-L2 call on six workloads
#   3. ncu (SpeedOfLight, Occupancy, LaunchStats, WarpStateStats, MemoryWorkloadAnalysis) on one warm call of
#      1x128, 1x2048 and 16x256: every kernel of the call, cuBLASLt's included
set -u
d=$(realpath "${KINDEX_DEVCARRY:-.devcarry/prof}")
lib=$d/lib/libkindex.so
DEADLINE=560 source results/device_steps.sh
export PYTHONPATH=benchmarks/gpu${PYTHONPATH:+:$PYTHONPATH}
stamp start

timeout $(cap 300) python3 benchmarks/gpu/backward_vs_torch.py --lib "$lib" --rounds 3 \
  --out "$L/backward_vs_torch_v5_h200.json" > "$L/backward_vs_torch_v5_h200.log" 2>&1
stamp "backward_vs_torch (16 workloads, 3 rounds) rc=$?"
tail -4 "$L/backward_vs_torch_v5_h200.log"

timeout $(cap 60) python3 benchmarks/gpu/backward_timeline.py --lib "$lib" --out "$L/backward_timeline_v5_h200.json" \
  > "$L/backward_timeline_v5_h200.txt" 2>&1
stamp "backward_timeline rc=$?"
grep -E '^[0-9]+x[0-9]+:' "$L/backward_timeline_v5_h200.txt"

timeout $(cap 200) ncu --profile-from-start off --target-processes all --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --csv --page details \
  python3 benchmarks/gpu/backward_timeline.py --lib "$lib" --ncu --workloads 1x128,1x2048,16x256 \
  > "$L/ncu_v5_h200.csv" 2> "$L/ncu_v5_h200.stderr"
stamp "ncu rc=$?"
wc -l "$L/ncu_v5_h200.csv"

tar -C "$L" -czf "$O/backward_profile_device.tar.gz" .
cp "$L/steps.txt" "$O/steps.txt"
