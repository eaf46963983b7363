#!/usr/bin/env bash
# The peers' set-up off the critical path (issue #14) on the lent GPU, in one call of at most 9 minutes:
#   1. the main job as a new user runs it (`kindex`, no arguments, in an empty folder) with the peers, cold:
#      FlashInfer's JIT cache and Inductor's cache empty (folders of this call's own);
#   2. the same main job again in another empty folder, warm: both caches as step 1 left them;
#   3. the torch-compile peer alone on 2 L2/003 workloads with an empty Inductor cache of its own, then again with
#      the cache it left: the cache effect on one peer, apart from everything else.
# Each step runs under /usr/bin/time (wall, user, sys; bash's `time` where it is missing) with a timeout: 280 s for
# each main job, what is left of the 9 minutes for step 3 (it is skipped when too little is); the machine's CPU time
# over the step (/proc/stat) is given beside it.
# Binaries: `KINDEX_CUDA_ARCHS=90a scripts/device-build.sh peers kindex_cli kindex_shared
# kindex_gpu_reference_shared`, carried as .devcarry/peers (KINDEX_DEVCARRY overrides); FlashInfer from
# .devcarry/flashinfer (install.sh). Everything lands in $OUT/peers_device.tar.gz, and summary.txt beside it: each
# step's exit code and times, the main jobs' tables, and each peer's set-up (results.json "set_up": wall time,
# workloads, torch.compile's on-disk cache hits and misses, warm-up processes).
#   bash results/runner/run_peers_device.sh
set -uo pipefail
# shellcheck source=device_run.sh
source "$(dirname "$0")/device_run.sh" peers
budget=${BUDGET_S:-530}  # the whole call, in seconds

# The machine's CPU time so far (user + nice + system + irq + softirq, all processes), in clock ticks. /usr/bin/time
# counts the processes that are waited for: all of kindex's when it ends on its own, but not those killed when a
# timeout cuts it (workers, Python processes, compile workers), so the machine's count (nothing else runs on it) is
# the one to trust.
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# Runs "$@" in folder $1 (created empty) with a timeout of $2 s, timed; stdout, stderr and times under $res/$3.*
timed() {
  local dir=$1 limit=$2 name=$3
  shift 3
  mkdir -p "$dir"
  local ticks0
  ticks0=$(machine_ticks)
  if [[ -x /usr/bin/time ]]; then
    (cd "$dir" && /usr/bin/time -f 'wall %e s, user %U s, sys %S s, max rss %M KB' -o "$res/$name.time" \
      timeout "$limit" "$@" > "$res/$name.txt" 2> "$res/$name.stderr")
  else
    (cd "$dir" && TIMEFORMAT='wall %R s, user %U s, sys %S s' &&
      { time timeout "$limit" "$@" > "$res/$name.txt" 2> "$res/$name.stderr"; } 2> "$res/$name.time")
  fi
  local rc=$?
  local cpu
  cpu=$(awk -v a="$ticks0" -v b="$(machine_ticks)" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.1f", (b - a) / hz}')
  echo "machine CPU ${cpu} s" >> "$res/$name.time"
  summary "$name: exit $rc ($(grep -E '^wall' "$res/$name.time" | tail -n 1); machine CPU ${cpu} s, all processes), limit $limit s"
  return $rc
}

# Each peer's set-up and each implementation's runs, from a bench's results.json (or runs.jsonl when it was cut).
describe_run() {
  "$KINDEX_PYTHON" - "$1" <<'EOF' | tee -a "$res/summary.txt"
import collections, json, os, sys
folder = sys.argv[1]
results = os.path.join(folder, "results.json")
if os.path.exists(results):
    report = json.load(open(results))
    runs = report["results"]
else:
    report = {}
    lines = os.path.join(folder, "runs.jsonl")
    runs = [json.loads(l) for l in open(lines)] if os.path.exists(lines) else []
    print("  (no results.json: the bench was cut; %d runs in runs.jsonl)" % len(runs))
for spec, s in sorted(report.get("set_up", {}).items()):
    print("  set-up %-14s %-9s %6.1f s  %2d workloads, %2d planned, compile cache %d hits / %d misses, "
          "%d warm-up processes %s" % (spec, s["status"], s["wall_s"], s["workloads"], s["planned"],
                                       s["compile_cache_hits"], s["compile_cache_misses"], s["warm_up_processes"],
                                       s.get("message", "")))
by_impl = collections.defaultdict(list)
for r in runs:
    by_impl[r["implementation"]].append(r)
for impl, rs in by_impl.items():
    status = collections.Counter(r["status"] for r in rs)
    plans = [r["plan_host_s"] for r in rs if r.get("plan_host_s") is not None]
    print("  runs %-14s %3d (%s), wall %.1f s in all, largest %.1f s, plan steps %.2f s in all (largest %.2f s)" % (
        impl, len(rs), ", ".join("%s %d" % kv for kv in status.items()), sum(r["wall_s"] for r in rs),
        max(r["wall_s"] for r in rs), sum(plans), max(plans, default=0)))
for spec, why in report.get("not_available", {}).items():
    print("  not available: %s: %s" % (spec, why))
EOF
}

{
  date -u +%FT%TZ
  git -C "$repo" rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  echo "cores: $(nproc)"
  "$KINDEX_PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda)"
  "$KINDEX_PYTHON" -c "import triton; print('triton', triton.__version__)" 2>&1 | tail -1
} > "$res/environment.txt" 2>&1

# FlashInfer with its JIT cache in a folder of this call's own (FIWS: empty, so step 1 is cold).
install_flashinfer "$scratch/fiws"
"$KINDEX_PYTHON" -c "import flashinfer; print('flashinfer', flashinfer.__version__)" >> "$res/environment.txt" 2>&1
summary "setup: $((SECONDS - start)) s; $(grep -E '^(NVIDIA|cores|torch|python|flashinfer)' "$res/environment.txt" | tr '\n' ' ')"

# 1-2. The main job cold, then warm. Inductor's cache in a folder of this call's own (kindex itself leaves
# TORCHINDUCTOR_CACHE_DIR and TMPDIR alone: by default the cache is <temp dir>/torchinductor_<user>).
export TORCHINDUCTOR_CACHE_DIR=$scratch/inductor-main
for pass in cold warm; do
  left=$((budget - (SECONDS - start)))
  limit=$((left < 280 ? left : 280))
  if ((limit < 30)); then summary "main_job_$pass: skipped (${left} s left)"; continue; fi
  timed "$scratch/main-$pass" "$limit" "main_job_$pass" "$d/bin/kindex"
  cp "$scratch/main-$pass/kindex-results/results.json" "$res/main_job_${pass}_results.json" 2>/dev/null ||
    cp "$scratch/main-$pass/kindex-results/runs.jsonl" "$res/main_job_${pass}_runs.jsonl" 2>/dev/null
  describe_run "$scratch/main-$pass/kindex-results"
  summary "  caches after: inductor $(du -sh "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null | cut -f1)" \
    "($(find "$TORCHINDUCTOR_CACHE_DIR" -path '*fxgraph*' -type f 2>/dev/null | wc -l) FX graph files)," \
    "flashinfer $(du -sh "${FLASHINFER_WORKSPACE_BASE:-$scratch/fiws}" 2>/dev/null | cut -f1)"
done

# 3. torch-compile alone on 2 workloads of L2/003 (2x128 and 1x128), its own Inductor cache: empty, then warm.
export TORCHINDUCTOR_CACHE_DIR=$scratch/inductor-alone
for pass in cold warm; do
  left=$((budget - (SECONDS - start)))
  limit=$((left < 150 ? left : 150))
  if ((limit < 30)); then summary "torch_compile_$pass: skipped (${left} s left)"; continue; fi
  timed "$scratch/alone-$pass" "$limit" "torch_compile_$pass" "$d/bin/kindex" bench \
    --problem 003_grouped_query_attention_with_rope_backward --workloads 2,11 --impl torch-compile \
    --out "$scratch/alone-$pass/out" --store none
  describe_run "$scratch/alone-$pass/out"
done

for pass in cold warm; do
  [[ -f $res/main_job_$pass.txt ]] || continue
  summary "--- main job, $pass"
  sed -n '/kindex beside/,$p' "$res/main_job_$pass.txt" | tee -a "$res/summary.txt"
done
pack
