#!/usr/bin/env bash
# A signed rerun and the feed on the lent GPU (issue #30's closing note), in one call of a minute or two:
#   1. KernelIndex's export imported into an empty store (the index as a user fills it); follows: the operation
#      gqa_paged_decode_h24_kv4_d128_ps64 and the GPU H200;
#   2. `kindex bench` of kindex's kernels ($IMPL, default kindex; $PROBLEM another operation) on one workload, then `kindex
#      rerun` of that run signed with a key of `kindex keygen` (the same implementation: verdict replicated when it
#      passes); with FlashInfer importable, seed 003's record (run 01a00b1d-382c-7e68-bbed-30ee323627a7, the
#      flashinfer peer) rerun and signed too;
#   3. `kindex attest verify` of each attestation against the store, and of one altered after signing;
#   4. `kindex feed` (text and Atom), and what `kindex serve` gives: /feed.xml, the original's run page (its Reruns
#      table) and /api/runs/ID.
# Binaries: `KINDEX_CUDA_ARCHS=90a scripts/device-build.sh attest kindex_cli kindex_shared
# kindex_gpu_reference_shared`, carried as .devcarry/attest (KINDEX_DEVCARRY overrides: a build folder with bin/ and
# lib/); FlashInfer from .devcarry/flashinfer (install.sh) when there. Everything lands in
# $OUT/attest_device.tar.gz (and summary.txt beside it).
#   bash results/runner/run_attest_device.sh
set -uo pipefail
# shellcheck source=device_run.sh
source "$(dirname "$0")/device_run.sh" attest
impl=${IMPL:-kindex}
problem=${PROBLEM:-gqa_paged_decode_h24_kv4_d128_ps64}
seed003=01a00b1d-382c-7e68-bbed-30ee323627a7
store=$res/kindex.db
k() { "$d/bin/kindex" "$@"; }

{
  date -u +%FT%TZ
  git -C "$repo" rev-parse HEAD 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
} > "$res/environment.txt" 2>&1
install_flashinfer "${FIWS:-/tmp/fiws}"

# 1. The index, and what is followed.
k import --store "$store" "$repo/tests/data/kernelindex/export-slice-gqa.jsonl.zst" > "$res/import.txt" 2>&1
summary "import: exit $?"
k follow operation "$problem" --store "$store" >> "$res/follow.txt" 2>&1
k follow gpu H200 --store "$store" >> "$res/follow.txt" 2>&1
summary "follow: exit $?"
(cd "$res" && k keygen signer.key) > "$res/keygen.txt" 2>&1
summary "keygen: exit $? ($(head -1 "$res/keygen.txt"))"

# 2. kindex's own run, then its signed rerun; seed 003's record where FlashInfer is here.
t=$SECONDS
timeout 300 "$d/bin/kindex" bench --problem "$problem" --workloads 0 --impl "$impl" --store "$store" \
  --out "$res/bench" > "$res/bench.txt" 2>&1
summary "bench: exit $? in $((SECONDS - t)) s"
own=$("$KINDEX_PYTHON" -c "import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute(\"SELECT id FROM benchmark_runs WHERE origin = 'kindex' LIMIT 1\").fetchone()
print(row[0] if row else '')" "$store")
summary "kindex's run: ${own:-none}"
originals=()
[[ -n $own ]] && originals+=("$own")
"$KINDEX_PYTHON" -c "import flashinfer" 2>/dev/null && originals+=("$seed003")
n=0
for original in "${originals[@]}"; do
  n=$((n + 1))
  t=$SECONDS
  timeout 300 "$d/bin/kindex" rerun "$original" --store "$store" --out "$res/rerun$n" --sign "$res/signer.key" \
    --attestation "$res/attestation$n.json" > "$res/rerun$n.txt" 2> "$res/rerun$n.stderr"
  summary "rerun of $original: exit $? in $((SECONDS - t)) s"
  cat "$res/rerun$n.stderr" "$res/rerun$n.txt" | tee -a "$res/summary.txt"
  # 3. Verified as written; refused once altered (its verdict flipped).
  k attest verify "$res/attestation$n.json" --store "$store" > "$res/verify$n.txt" 2>&1
  summary "verify: exit $? $(grep -v '^kindex: store' "$res/verify$n.txt" | head -3)"
  "$KINDEX_PYTHON" - "$res/attestation$n.json" "$res/altered$n.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
s = doc["statement"]
s["verdict"] = "not_replicated" if s["verdict"] == "replicated" else "replicated"
open(sys.argv[2], "w").write(json.dumps(doc) + "\n")
EOF
  k attest verify "$res/altered$n.json" --store "$store" > "$res/verify_altered$n.txt" 2>&1
  summary "verify altered: exit $? $(grep -v '^kindex: store' "$res/verify_altered$n.txt" | head -3)"
done

# 4. The feed, and the pages.
k feed --store "$store" --limit 30 > "$res/feed.txt" 2>&1
k feed --atom --store "$store" --limit 30 > "$res/feed.xml" 2>/dev/null
summary "feed: $(grep -c . "$res/feed.txt") lines"
grep -v '^kindex: store' "$res/feed.txt" | head -12 | tee -a "$res/summary.txt"
k serve --store "$store" --port 0 > "$res/serve.log" 2>&1 &
serve=$!
for _ in $(seq 50); do grep -q "http://127.0.0.1:" "$res/serve.log" 2>/dev/null && break; sleep 0.2; done
port=$(grep -o "http://127.0.0.1:[0-9]*" "$res/serve.log" | head -1 | sed 's/.*://')
"$KINDEX_PYTHON" - "$port" "$res" "${originals[@]}" <<'EOF'
import sys, urllib.request
port, res, originals = sys.argv[1], sys.argv[2], sys.argv[3:]
pages = {"served_feed.xml": "/feed.xml", f"served_feed_{'gpu_H200'}.xml": "/feeds/gpu/H200.xml"}
for n, original in enumerate(originals, 1):
    pages[f"original{n}_run_page.html"] = f"/runs/{original}"
    pages[f"api_original{n}_run.json"] = f"/api/runs/{original}"
for name, path in pages.items():
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r, open(f"{res}/{name}", "wb") as f:
        f.write(r.read())
EOF
summary "pages: exit $?"
kill "$serve" 2>/dev/null
wait "$serve" 2>/dev/null
# Each original's Reruns table, as text.
"$KINDEX_PYTHON" - "$res"/original*_run_page.html <<'EOF' | tee -a "$res/summary.txt"
import re, sys
for page in sys.argv[1:]:
    table = re.search(r'<table id="rerun-table">.*?</table>', open(page, encoding="utf-8").read())
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(0) if table else ""):
        print(" | ".join(re.sub(r"<[^>]*>", "", cell).strip() for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)))
EOF
pack
