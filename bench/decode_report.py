#!/usr/bin/env python3
"""Joins bench_decode's JSON with the PyTorch baselines (bench/torch_decode_baselines.py) into the committed
results file, and prints the performance-log table (markdown).

  python3 bench/decode_report.py results/decode/bench_decode_h200.json results/decode/torch_baselines_h200.json \
      --out results/decode/paged_decode_h200.json [--select VARIANT --note TEXT] > table.md
Both inputs must come from the same page tables (bench_decode --dump-tables feeds the baselines script).
--select reports that measured variant (one run, one binary) as "kindex" (the library's shipped default when it
was fixed after the run; --note says so in the output's "selection" field). Synthetic workloads (bench_decode
--synthetic) have no baselines: they move to the output's "synthetic" list, out of the table.
"""
import argparse
import json
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("baselines")
    ap.add_argument("--out")
    ap.add_argument("--select")
    ap.add_argument("--note")
    args = ap.parse_args()
    bench = json.load(open(args.bench))
    base = json.load(open(args.baselines))
    bench["synthetic"] = [w for w in bench["workloads"] if w["definition"].startswith("synthetic")]
    bench["workloads"] = [w for w in bench["workloads"] if not w["definition"].startswith("synthetic")]
    if args.select:
        for w in bench["workloads"] + bench["synthetic"]:
            w["kindex"] = dict(w["variants"][args.select], variant=args.select)
        bench["selection"] = args.note or f"'kindex' is the measured variant {args.select}"
    by_uuid = {w["uuid"]: w for w in base["workloads"]}
    bench["baselines"] = {k: v for k, v in base.items() if k != "workloads"}
    print("| workload | batch | KV pages | MB moved | floor us | kindex us | TB/s | x floor | SDPA us | x SDPA | reference us | x reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for w in bench["workloads"]:
        b = by_uuid[w["uuid"]]
        kx = w["kindex"]["median_us"]
        sdpa, ref = b["gathered_sdpa"]["median_us"], b["reference"]["median_us"]
        w["baselines"] = {"gathered_sdpa": b["gathered_sdpa"], "reference": b["reference"]}
        w["speedup_vs_gathered_sdpa"] = sdpa / kx
        w["speedup_factor"] = ref / kx  # FlashInfer-Bench's name: reference / solution
        print(f'| {w["label"]} | {w["batch_size"]} | {w["num_kv_indices"]} | {w["bytes"] / 1e6:.2f} | {w["floor_us"]:.2f} '
              f'| {kx:.2f} | {w["kindex"]["achieved_tb_per_s"]:.2f} | {w["kindex"]["ratio_to_floor"]:.2f} '
              f'| {sdpa:.1f} | {sdpa / kx:.1f} | {ref:.0f} | {ref / kx:.0f} |')
    ws = bench["workloads"]
    big = [w for w in ws if w["bytes"] >= 64e6]
    small = [w for w in ws if w["bytes"] < 4e6]
    gm = lambda xs: statistics.geometric_mean(xs)
    print()
    print(f'- workloads >= 64 MB ({len(big)}): min {min(w["kindex"]["achieved_tb_per_s"] for w in big):.2f} TB/s, '
          f'median {statistics.median(w["kindex"]["achieved_tb_per_s"] for w in big):.2f} TB/s, '
          f'max {max(w["kindex"]["achieved_tb_per_s"] for w in big):.2f} TB/s')
    print(f'- workloads < 4 MB ({len(small)}): max {max(w["kindex"]["median_us"] for w in small):.2f} us, '
          f'median {statistics.median(w["kindex"]["median_us"] for w in small):.2f} us')
    print(f'- speedup over gathered SDPA: min {min(w["speedup_vs_gathered_sdpa"] for w in ws):.2f}x, '
          f'geomean {gm([w["speedup_vs_gathered_sdpa"] for w in ws]):.2f}x; over the reference: '
          f'min {min(w["speedup_factor"] for w in ws):.1f}x, geomean {gm([w["speedup_factor"] for w in ws]):.1f}x')
    if args.out:
        json.dump(bench, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
