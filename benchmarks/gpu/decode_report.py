#!/usr/bin/env python3
"""The decode performance-log tables (markdown), in two forms:

  python3 benchmarks/gpu/decode_report.py SAME_PROCESS.json
      the table of a benchmarks/gpu/torch_decode_baselines.py run (kindex, FlashInfer tensor-core and CUDA-core decode,
      gathered SDPA, the reference, all in one process on the same inputs) with its per-definition summary;
      `torch_decode_baselines.py --report SAME_PROCESS.json` prints the same.
  python3 benchmarks/gpu/decode_report.py results/decode/bench_decode_h200.json results/decode/torch_baselines_h200.json \
      --out results/decode/paged_decode_h200.json [--select VARIANT --note TEXT] > table.md
      joins bench_decode's JSON with the baselines' (the gathered_sdpa and reference columns) into the committed
      results file.
  python3 benchmarks/gpu/decode_report.py --diff BEFORE.json AFTER.json [BEFORE2.json AFTER2.json]
      per-workload medians of two bench_decode runs (two binaries, same flags) and their ratio; with a second pair
      (the same two binaries run again, interleaved), the run-to-run spread of each binary next to the change.
Both inputs must come from the same page tables (bench_decode --dump-tables feeds the baselines script).
--select reports that measured variant (one run, one binary) as "kindex" (the library's shipped default when it
was fixed after the run; --note says so in the output's "selection" field). Synthetic workloads (bench_decode
--synthetic) have no baselines: they move to the output's "synthetic" list, out of the table.
"""
import argparse
import json
import statistics


def _num(x, fmt):
    return format(x, fmt) if isinstance(x, (int, float)) else "-"


def same_process_table(doc):
    """Markdown: one row per workload of a torch_decode_baselines.py run, then a summary per definition."""
    med = lambda w, name: w[name].get("median_us") if isinstance(w.get(name), dict) else None
    verdict = lambda w, name: ("pass" if w["correctness"][name]["passed"] else "FAIL") \
        if name in w.get("correctness", {}) else "-"
    copy = doc["copy_rate"]["bytes_per_s"]
    fi = doc.get("flashinfer", {})
    lines = [
        f"Device {doc['device']['name']}, {doc['date_utc']}, kindex {doc['kindex']['version']}, FlashInfer "
        f"{fi.get('version', '-')} ({fi.get('status')}), torch {doc['device'].get('torch')}. Measured copy rate "
        f"{copy / 1e12:.3f} TB/s (floor = bytes / that). Cold L2, spin {doc['protocol']['spin_us']:g} us ahead of "
        f"each call, {doc['protocol']['warmup']} warm-up + {doc['protocol']['iterations']} timed, median. "
        f"Ratios < 1: kindex faster. Comparator: FlashInfer-Bench rule against the definition's reference.",
        "",
        "| workload | batch | MB | floor us | kindex us | TB/s | x floor | FI TC us | FI CUDA us | k/TC | k/CUDA "
        "| k/best | plan us TC / CUDA | SDPA us | reference us | comparator k / TC / CUDA / SDPA |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for w in doc["workloads"]:
        k = w.get("kindex", {})
        plan = lambda name: _num(w[name]["plan_host_us"]["median_us"], ".0f") \
            if isinstance(w.get(name), dict) and "plan_host_us" in w[name] else "-"
        lines.append(
            f"| {w['label']} | {w['batch_size']} | {w['bytes'] / 1e6:.2f} | {w['floor_us']:.2f} "
            f"| {_num(med(w, 'kindex'), '.2f')} | {_num(k.get('achieved_tb_per_s'), '.2f')} "
            f"| {_num(k.get('ratio_to_floor'), '.2f')} | {_num(med(w, 'flashinfer_tensor_core'), '.2f')} "
            f"| {_num(med(w, 'flashinfer_cuda_core'), '.2f')} | {_num(w.get('ratio_kindex_vs_flashinfer_tc'), '.3f')} "
            f"| {_num(w.get('ratio_kindex_vs_flashinfer_cuda'), '.3f')} "
            f"| {_num(w.get('ratio_kindex_vs_flashinfer_best'), '.3f')} "
            f"| {plan('flashinfer_tensor_core')} / {plan('flashinfer_cuda_core')} "
            f"| {_num(med(w, 'gathered_sdpa'), '.1f')} | {_num(med(w, 'reference'), '.0f')} "
            f"| {' / '.join(verdict(w, n) for n in ('kindex', 'flashinfer_tensor_core', 'flashinfer_cuda_core', 'gathered_sdpa'))} |")
    lines.append("")
    names = {"ratio_kindex_vs_flashinfer_tc": "vs FlashInfer tensor-core",
             "ratio_kindex_vs_flashinfer_cuda": "vs FlashInfer CUDA-core",
             "ratio_kindex_vs_flashinfer_best": "vs the faster of the two"}
    for definition, s in doc.get("summary", {}).items():
        parts = []
        for key, title in names.items():
            if key in s:
                r = s[key]
                parts.append(f"{title}: geomean {r['geomean']:.3f}, faster on {r['faster']}/{r['of']}, worst "
                             f"{r['worst']['ratio']:.2f} ({r['worst']['label']}), best {r['best']['ratio']:.2f} "
                             f"({r['best']['label']})")
        checks = [f"{n} {s[n]['comparator_passed']}/{s[n]['comparator_checked']}" for n in
                  ("kindex", "flashinfer_tensor_core", "flashinfer_cuda_core", "gathered_sdpa") if n in s]
        lines.append(f"- {definition} ({s['workloads']} workloads): " + ("; ".join(parts) or "no FlashInfer timings")
                     + ". Comparator passes: " + ", ".join(checks) + ".")
    covered = [w[n]["launch_covered"] for w in doc["workloads"] for n in
               ("kindex", "flashinfer_tensor_core", "flashinfer_cuda_core", "gathered_sdpa")
               if isinstance(w.get(n), dict) and "launch_covered" in w[n]]
    if covered:
        lines.append(f"- Launch overhead hidden behind the spin on {min(covered) * 100:.0f}%-{max(covered) * 100:.0f}% "
                     f"of timed calls per implementation and workload (100%: the spans are pure GPU time).")
    return "\n".join(lines)


def diff_table(paths):
    """Markdown: medians of bench_decode runs of two binaries (before, after[, before2, after2]) per workload."""
    runs = [{w["label"]: w["kindex"]["median_us"] for w in json.load(open(p))["workloads"]} for p in paths]
    labels = [l for l in runs[0] if all(l in r for r in runs)]
    gm = lambda xs: statistics.geometric_mean(xs)
    pairs = len(runs) // 2
    head = "| workload | " + " | ".join(f"before{i or ''} us | after{i or ''} us" for i in range(pairs)) + \
        " | after/before |" + (" before2/before | after2/after |" if pairs > 1 else "")
    lines = [head, "|---|" + "---:|" * (2 * pairs + 1 + (2 if pairs > 1 else 0))]
    change, noise = [], []
    for l in labels:
        b = [runs[2 * i][l] for i in range(pairs)]
        a = [runs[2 * i + 1][l] for i in range(pairs)]
        r = gm(a) / gm(b)
        change.append(r)
        row = f"| {l} | " + " | ".join(f"{b[i]:.2f} | {a[i]:.2f}" for i in range(pairs)) + f" | {r:.3f} |"
        if pairs > 1:
            nb, na = b[1] / b[0], a[1] / a[0]
            noise += [nb, na]
            row += f" {nb:.3f} | {na:.3f} |"
        lines.append(row)
    lines.append("")
    lines.append(f"- after/before over {len(labels)} workloads: geomean {gm(change):.4f}, "
                 f"range {min(change):.3f}-{max(change):.3f}")
    if noise:
        lines.append(f"- the same binary run twice: geomean {gm(noise):.4f}, range {min(noise):.3f}-{max(noise):.3f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--diff", nargs="+", metavar="JSON", help="before.json after.json [before2.json after2.json]")
    ap.add_argument("bench", nargs="?")
    ap.add_argument("baselines", nargs="?")
    ap.add_argument("--out")
    ap.add_argument("--select")
    ap.add_argument("--note")
    args = ap.parse_args()
    if args.diff:
        if len(args.diff) not in (2, 4):
            ap.error("--diff takes two or four bench_decode JSON files")
        print(diff_table(args.diff))
        return
    if not args.bench:
        ap.error("the bench_decode or torch_decode_baselines JSON is required")
    bench = json.load(open(args.bench))
    if bench.get("benchmark") == "torch_decode_baselines":
        print(same_process_table(bench))
        return
    if not args.baselines:
        ap.error("a bench_decode JSON needs the baselines JSON as the second argument")
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
