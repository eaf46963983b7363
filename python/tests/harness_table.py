#!/usr/bin/env python3
"""The harnesses' numbers next to `kindex bench`'s, one Markdown row per workload (docs/harnesses.md).

    python3 python/tests/harness_table.py HARNESSES_DIR KINDEX_RESULTS_JSON [--threshold 0.10]

HARNESSES_DIR: the folder run_harnesses.sh's tar holds (flashinfer-bench/traces/**.jsonl, sol-execbench/
traces.jsonl). KINDEX_RESULTS_JSON: a `kindex bench` / main-job results.json of the same workloads on the same kind
of GPU; its runs of implementation "kindex" are matched by (definition, workload uuid). One row per trace of a
kindex solution: its status, the harness's latency of kindex, of its reference and of the FlashInfer baseline on
the same workload (where it ran), kindex bench's latency (its summary statistic, kernel time by its timer), the
ratio harness / kindex bench, and a mark where it is off 1 by more than the threshold. Then per harness and
definition the median ratio. Exit status 1 when a kindex trace has no kindex run to compare with.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

HARNESSES = (("FlashInfer-Bench", "flashinfer-bench/traces/**/*.jsonl"), ("SOL ExecBench", "sol-execbench/traces.jsonl"))


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("harnesses", type=Path)
    parser.add_argument("kindex_results", type=Path)
    parser.add_argument("--threshold", type=float, default=0.10)
    args = parser.parse_args(argv)

    kindex = {}
    for r in json.loads(args.kindex_results.read_text())["results"]:
        if r.get("implementation") == "kindex" and r.get("status") == "passed":
            kindex[(r["definition"], r["workload_uuid"])] = (r["timing"]["summary"]["latency_ns"] / 1e3,
                                                             r["timing"].get("timer", "?"))
    print("| harness | definition | workload | status | harness: kindex (µs) | harness: reference (µs) "
          "| harness: FlashInfer (µs) | kindex bench (µs) | ratio | |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---|")
    cell = lambda v, scale=1e3: "—" if v is None else f"{v * scale:.1f}"  # noqa: E731
    ratios, unmatched = {}, 0
    for harness, pattern in HARNESSES:
        traces = [t for path in sorted(args.harnesses.glob(pattern)) for t in read_jsonl(path)]
        # Other solutions the harness ran on a workload (the FlashInfer baseline), by workload.
        baseline = {(t["definition"], t["workload"]["uuid"]): ((t.get("evaluation") or {}).get("performance") or {})
                    .get("latency_ms") for t in traces if str(t.get("solution", "")).startswith("flashinfer")}
        for t in traces:
            if not str(t.get("solution", "")).startswith("kindex"):
                continue
            ev = t.get("evaluation") or {}
            perf = ev.get("performance") or {}
            key = (t["definition"], t["workload"]["uuid"])
            axes = ", ".join(f"{k}={v}" for k, v in t["workload"]["axes"].items())
            mine, ref = perf.get("latency_ms"), perf.get("reference_latency_ms")
            bench = kindex.get(key)
            if bench is None:
                unmatched += 1
            ratio = mine * 1e3 / bench[0] if mine is not None and bench else None
            off = ratio is not None and abs(ratio - 1) > args.threshold
            if ratio is not None:
                ratios.setdefault((harness, t["definition"]), []).append(ratio)
            print(f"| {harness} | {t['definition']} | {axes} | {ev.get('status', '—')} | {cell(mine)} | {cell(ref)} "
                  f"| {cell(baseline.get(key))} | {cell(bench[0] if bench else None, 1)} "
                  f"| {'—' if ratio is None else f'{ratio:.2f}'} | {'> ' + format(args.threshold, '.0%') if off else ''} |")
    print()
    for (harness, definition), values in ratios.items():
        outside = sum(abs(r - 1) > args.threshold for r in values)
        print(f"- {harness} {definition}: {len(values)} workloads, median ratio {statistics.median(values):.2f} "
              f"(min {min(values):.2f}, max {max(values):.2f}), {outside} off by more than {args.threshold:.0%}")
    if unmatched:
        print(f"- {unmatched} traces have no passed kindex run in {args.kindex_results.name}", file=sys.stderr)
    return 1 if unmatched else 0


if __name__ == "__main__":
    raise SystemExit(main())
