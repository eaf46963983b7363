#!/usr/bin/env bash
# Solutions and peers on the lent GPU (issue #14, section 1), in one call of about 5 minutes:
#   1. a FlashInfer-Bench python solution through `kindex bench --impl solution:` — kindex's own export
#      (python -m kindex.solutions flashinfer-bench: the kindex package's paged_decode) on the first 8 workloads of
#      gqa_paged_decode_h32_kv4_d128_ps1, beside kindex native and the FlashInfer peers (both variants);
#   2. SOL-ExecBench pytorch solutions through `--impl solution:` on 2 workloads of L2/003 — kindex's own export
#      (kindex.gqa_rope_backward) and the definition's reference code as a pytorch solution (eager) — beside kindex
#      native and the torch-compile peer;
#   3. the main job as a new user runs it (`kindex`, no arguments, in an empty folder), with the peers, timed.
# Binaries: `KINDEX_CUDA_ARCHS=90a scripts/device-build.sh runner2 kindex_cli kindex_shared
# kindex_gpu_reference_shared`, carried as .devcarry/runner2 (KINDEX_DEVCARRY overrides); FlashInfer from
# .devcarry/flashinfer (install.sh). The kindex Python package is used from python/ with KINDEX_LIBRARY pointing at
# the carried libkindex.so (no pip install). Everything lands in $OUT/solutions_device.tar.gz (and a summary.txt
# beside it).
#   bash results/runner/run_solutions_device.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
d=$(realpath "${KINDEX_DEVCARRY:-$repo/.devcarry/runner2}")
out=${OUT:-/tmp/solutions-out}
res=$(mktemp -d)/solutions_device
mkdir -p "$out" "$res"
scratch=$(mktemp -d)
export KINDEX_PYTHON=${PYTHON:-python3}
summary() { echo "$*" | tee -a "$res/summary.txt"; }
start=$SECONDS

{
  date -u +%FT%TZ
  git -C "$repo" rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  echo "cores: $(nproc)"
  "$KINDEX_PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda)"
  "$KINDEX_PYTHON" -c "import triton; print('triton', triton.__version__)" 2>&1 | tail -1
} > "$res/environment.txt" 2>&1

# FlashInfer (its JIT environment) and the kindex package from the source tree.
if [[ -f $repo/.devcarry/flashinfer/install.sh ]]; then
  FISITE=$scratch/fisite FIWS=${FIWS:-/tmp/fiws} PYTHON=$KINDEX_PYTHON bash "$repo/.devcarry/flashinfer/install.sh" \
    > "$res/flashinfer_install.log" 2>&1
  # shellcheck disable=SC1091
  source "$scratch/fisite/env.sh"
fi
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}" KINDEX_LIBRARY="$d/lib/libkindex.so"
"$KINDEX_PYTHON" -c "import flashinfer; print('flashinfer', flashinfer.__version__)" >> "$res/environment.txt" 2>&1
summary "setup: $((SECONDS - start)) s"

# 1. FlashInfer-Bench: kindex's exported python solution, beside kindex native and FlashInfer.
"$KINDEX_PYTHON" -m kindex.solutions flashinfer-bench --out "$res/fib_dataset" > /dev/null
fib=$res/fib_dataset/solutions/gqa_paged/gqa_paged_decode_h32_kv4_d128_ps1/kindex_paged_decode_gqa_paged_decode_h32_kv4_d128_ps1.json
t=$SECONDS
timeout 100 "$d/bin/kindex" bench --problem gqa_paged_decode_h32_kv4_d128_ps1 --workloads 0-7 --impl kindex \
  --impl "solution:$fib" --peer flashinfer --peer flashinfer-tc --out "$res/fib" --store none \
  > "$res/fib.txt" 2> "$res/fib.stderr"
summary "1. FlashInfer-Bench solution: exit $? in $((SECONDS - t)) s"

# 2. SOL-ExecBench: kindex's exported pytorch solution and the reference as a pytorch solution, beside kindex and
#    torch.compile.
"$KINDEX_PYTHON" -m kindex.solutions sol-execbench --out "$res/sol_problem" > /dev/null
"$KINDEX_PYTHON" - "$repo/definitions/sol-execbench/L2/003_grouped_query_attention_with_rope_backward/definition.json" \
  "$res/sol_reference_solution.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
json.dump({"name": "reference_eager", "definition": d["name"], "author": "the definition's reference code",
           "spec": {"languages": ["pytorch"], "target_hardware": ["LOCAL"], "entry_point": "main.py::run",
                    "destination_passing_style": False},
           "sources": [{"path": "main.py", "content": d["reference"]}]}, open(sys.argv[2], "w"), indent=1)
EOF
t=$SECONDS
timeout 110 "$d/bin/kindex" bench --problem 003_grouped_query_attention_with_rope_backward --workloads 2,11 \
  --impl kindex --impl "solution:$res/sol_problem/solution.json" --impl "solution:$res/sol_reference_solution.json" \
  --peer torch-compile --out "$res/sol" --store none > "$res/sol.txt" 2> "$res/sol.stderr"
summary "2. SOL-ExecBench solutions: exit $? in $((SECONDS - t)) s"

# 3. The main job with the peers, as a new user runs it.
work=$(mktemp -d)
t=$SECONDS
TIMEFORMAT='wall %R s, user %U s, sys %S s'
(cd "$work" && { time timeout "${MAIN_TIMEOUT:-140}" "$d/bin/kindex" > "$res/main_job.txt" 2> "$res/main_job.stderr"; } \
  2> "$res/main_job_time.txt")
summary "3. main job: exit $? ($(cat "$res/main_job_time.txt"))"
cp "$work/kindex-results/results.json" "$res/main_job_results.json" 2>/dev/null ||
  cp "$work/kindex-results/runs.jsonl" "$res/main_job_runs.jsonl" 2>/dev/null

for f in fib sol; do
  summary "--- $f"
  sed -n '/^problem/,$p' "$res/$f.txt" | tee -a "$res/summary.txt"
done
summary "--- main job"
sed -n '/kindex beside/,$p' "$res/main_job.txt" | tee -a "$res/summary.txt"
summary "total: $((SECONDS - start)) s"
tar -C "$(dirname "$res")" -czf "$out/solutions_device.tar.gz" solutions_device
cp "$res/summary.txt" "$out/summary.txt"
