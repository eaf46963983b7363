#!/usr/bin/env bash
# `kindex rerun` on the lent GPU (issue #14, section 1, last bullet), in one call of about a minute: seed 003's
# record — FlashInfer-Bench's FlashInfer wrapper baseline (flashinfer_wrapper_1b7890) on
# gqa_paged_decode_h24_kv4_d128_ps64, workload num_pages=425 batch_size=1 num_kv_indices=361, 359.8 µs (mean) on
# an NVIDIA B200 as KernelIndex's export publishes it (run 01a00b1d-382c-7e68-bbed-30ee323627a7 of
# tests/data/kernelindex/export-slice-gqa.jsonl.zst) — re-measured here by the peer it maps to (flashinfer:
# FlashInfer's BatchDecodeWithPagedKVCacheWrapper), under FlashInfer-Bench's protocol, and recorded linked to it.
# Then the two runs' views (the JSON API's) and the pages that show the pair (the original's run page, the
# rerun's, the original's workload page), as `kindex serve` serves them.
# Binaries: `KINDEX_CUDA_ARCHS=90a scripts/device-build.sh rerun kindex_cli kindex_shared
# kindex_gpu_reference_shared`, carried as .devcarry/rerun (KINDEX_DEVCARRY overrides); FlashInfer from
# .devcarry/flashinfer (install.sh). Everything lands in $OUT/rerun_device.tar.gz (and a summary.txt beside it).
#   bash results/runner/run_rerun_device.sh
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
d=$(realpath "${KINDEX_DEVCARRY:-$repo/.devcarry/rerun}")
out=${OUT:-/tmp/rerun-out}
res=$(mktemp -d)/rerun_device
mkdir -p "$out" "$res"
scratch=$(mktemp -d)
export KINDEX_PYTHON=${PYTHON:-python3}
summary() { echo "$*" | tee -a "$res/summary.txt"; }
original=01a00b1d-382c-7e68-bbed-30ee323627a7
store=$res/kindex.db
start=$SECONDS

{
  date -u +%FT%TZ
  git -C "$repo" rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  "$KINDEX_PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda)"
} > "$res/environment.txt" 2>&1
if [[ -f $repo/.devcarry/flashinfer/install.sh ]]; then
  FISITE=$scratch/fisite FIWS=${FIWS:-/tmp/fiws} PYTHON=$KINDEX_PYTHON bash "$repo/.devcarry/flashinfer/install.sh" \
    > "$res/flashinfer_install.log" 2>&1
  # shellcheck disable=SC1091
  source "$scratch/fisite/env.sh"
fi
"$KINDEX_PYTHON" -c "import flashinfer; print('flashinfer', flashinfer.__version__)" >> "$res/environment.txt" 2>&1

# The index as a user fills it (KernelIndex's export), then the rerun of seed 003's record.
"$d/bin/kindex" import --store "$store" "$repo/tests/data/kernelindex/export-slice-gqa.jsonl.zst" > "$res/import.txt" 2>&1
summary "import: exit $?"
t=$SECONDS
timeout 300 "$d/bin/kindex" rerun "$original" --store "$store" --out "$res/files" > "$res/rerun.txt" 2> "$res/rerun.stderr"
summary "rerun: exit $? in $((SECONDS - t)) s"
cat "$res/rerun.stderr" "$res/rerun.txt" | tee -a "$res/summary.txt"

# Both runs as the JSON API gives them, and the pages.
"$d/bin/kindex" show run "$original" --json --store "$store" > "$res/original_run.json" 2>/dev/null
rerun=$("$KINDEX_PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['reruns'][-1]['rerun']['id'])" \
  "$res/original_run.json" 2>/dev/null)
workload=$("$KINDEX_PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['workloadId'])" "$res/original_run.json")
summary "original $original (workload $workload), rerun ${rerun:-none}"
[[ -n $rerun ]] && "$d/bin/kindex" show run "$rerun" --json --store "$store" > "$res/rerun_run.json" 2>/dev/null
"$d/bin/kindex" serve --store "$store" --port 0 > "$res/serve.log" 2>&1 &
serve=$!
for _ in $(seq 50); do grep -q "http://127.0.0.1:" "$res/serve.log" && break; sleep 0.2; done
port=$(grep -o "http://127.0.0.1:[0-9]*" "$res/serve.log" | head -1 | sed 's/.*://')
"$KINDEX_PYTHON" - "$port" "$res" "$original" "$rerun" "$workload" <<'EOF'
import sys, urllib.request
port, res, original, rerun, workload = sys.argv[1:6]
pages = {"original_run_page.html": f"/runs/{original}", "workload_page.html": f"/workloads/{workload}",
         "api_original_run.json": f"/api/runs/{original}"}
if rerun:
    pages["rerun_run_page.html"] = f"/runs/{rerun}"
for name, path in pages.items():
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r, open(f"{res}/{name}", "wb") as f:
        f.write(r.read())
EOF
summary "pages: exit $?"
kill "$serve" 2>/dev/null
wait "$serve" 2>/dev/null
grep -o '<span class="rerun">.*</span>' "$res/original_run_page.html" | sed 's/<[^>]*>//g' | tee -a "$res/summary.txt"
summary "total: $((SECONDS - start)) s"
tar -C "$(dirname "$res")" -czf "$out/rerun_device.tar.gz" rerun_device
cp "$res/summary.txt" "$out/summary.txt"
