#!/usr/bin/env bash
# The runner's own time per run on the lent GPU: the device comparator's GPU tests (device Report == host Report on
# adversarial data, and the runner comparing a device run's outputs there), then the main job as a new user runs it
# (`kindex` with no arguments, in an empty folder) under /usr/bin/time, peers left out (KINDEX_PYTHON points at no
# interpreter, so FlashInfer and torch.compile are "not installed"; PEERS=1 keeps the host's Python). Binaries:
# `KINDEX_CUDA_ARCHS=90a scripts/device-build.sh speed test_gpu kindex_cli kindex_shared kindex_gpu_reference_shared`,
# carried in .devcarry/speed. Output in $OUT: summary.txt (wall, CPU, per-problem sums of the runs' phase times) and
# speed.tar.gz (the test log, the main job's table, stderr, time and results.json).
set -uo pipefail
d=$(realpath .devcarry/"${TAG:-speed}")
out=${OUT:-/tmp/speed-out}
logs=$(mktemp -d)
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; echo "cores: $(nproc)"; } > "$logs/device.txt"
timeout "${TESTS_TIMEOUT:-240}" "$d/bin/test_gpu" --gtest_filter="${SPEED_TESTS:-CompareDevice.*}" \
  > "$logs/tests_compare_device.log" 2>&1
echo "compare GPU tests exit $?"; grep -E '^\[ *(FAILED|PASSED|SKIPPED) *\]|tests ran' "$logs/tests_compare_device.log"
work=$(mktemp -d)
cd "$work" || exit 1
[ "${PEERS:-0}" = 1 ] || export KINDEX_PYTHON=/nonexistent/python3
if [ -x /usr/bin/time ]; then
  timeout "${MAIN_TIMEOUT:-300}" /usr/bin/time -f 'wall %e s, user %U s, sys %S s, max rss %M KiB' \
    -o "$logs/main_job_time.txt" "$d/bin/kindex" > "$logs/main_job.txt" 2> "$logs/main_job.stderr"
  rc=$?
else  # no GNU time on the host: bash's
  TIMEFORMAT='wall %R s, user %U s, sys %S s (bash time: /usr/bin/time missing)'
  { time timeout "${MAIN_TIMEOUT:-300}" "$d/bin/kindex" > "$logs/main_job.txt" 2> "$logs/main_job.stderr"; } \
    2> "$logs/main_job_time.txt"
  rc=$?
fi
echo "main job exit $rc ($(cat "$logs/main_job_time.txt"))"
cp kindex-results/results.json "$logs/main_job_results.json" 2>/dev/null
python3 - "$logs" > "$logs/summary.txt" <<'PY'
import json, sys
from collections import defaultdict
logs = sys.argv[1]
print(open(f"{logs}/device.txt").read().strip())
print("main job:", open(f"{logs}/main_job_time.txt").read().strip().splitlines()[-1])
try:
    report = json.load(open(f"{logs}/main_job_results.json"))
    results = report["results"]
except (OSError, ValueError, KeyError) as e:
    print("no results.json:", e)
    sys.exit(0)
phases = ["setup", "inputs", "reference", "implementation", "compare", "timing", "reference_timing"]
by = defaultdict(lambda: defaultdict(float))
for r in results:
    key = (r["definition"], r["implementation"])
    row = by[key]
    row["runs"] += 1
    row["passed"] += r["status"] == "passed"
    row["wall"] += r["wall_s"]
    row["on_device"] += r.get("compared_on") == "device"
    for p in phases:
        row[p] += r.get("phases_s", {}).get(p, 0.0)
    row["other"] = row["wall"] - sum(row[p] for p in phases)
    row["record"] += r.get("phases_s", {}).get("record", 0.0)
cols = ["runs", "passed", "on_device", "wall"] + phases + ["other", "record"]
print("\nper problem and implementation, seconds summed over its runs (on_device: runs compared on the device;"
      " other: wall_s less the phases; record: the runner's own work after each run, outside wall_s)")
print("definition implementation " + " ".join(cols))
total = defaultdict(float)
for (definition, impl), row in sorted(by.items()):
    print(definition, impl, " ".join(f"{row[c]:.3f}" if c not in ("runs", "passed", "on_device") else
                                     str(int(row[c])) for c in cols))
    for c in cols:
        total[c] += row[c]
print("total - " + " ".join(f"{total[c]:.3f}" if c not in ("runs", "passed", "on_device") else str(int(total[c]))
                            for c in cols))
print(f"\nrunner start (worker, environment, calibration, peer probes): {report.get('start_s', 0):.3f} s; "
      f"runs' wall_s {total['wall']:.3f} s; records {total['record']:.3f} s")
PY
cat "$logs/summary.txt"
tail -n 8 "$logs/main_job.txt"
cp "$logs/summary.txt" "$out/summary.txt"
tar -czf "$out/speed.tar.gz" -C "$logs" .
