#!/usr/bin/env python3
"""The harnesses' numbers next to `kindex bench`'s, one Markdown row per workload (docs/harnesses.md).

    python3 python/tests/harness_table.py HARNESSES_DIR KINDEX_RESULTS [--peers PEER_RUNS] [--threshold 0.10]

HARNESSES_DIR: the folder run_harnesses.sh's tar holds (flashinfer-bench/traces/**.jsonl, sol-execbench/
traces.jsonl). KINDEX_RESULTS: a `kindex bench` / main-job results.json (or a runs .jsonl) of the same workloads on
the same kind of GPU; its runs of implementation "kindex" are matched by (definition, workload uuid). PEER_RUNS
(optional, same formats): a `kindex bench` run with the FlashInfer peers (flashinfer, flashinfer-tc), whose kernel
times give the kernel-for-kernel comparison beside the harness's.

One row per trace of a kindex solution: its status, the harness's latency of kindex, of its reference and of the
FlashInfer baseline on the same workload (where it ran), kindex bench's latency (its summary statistic, kernel time
by its timer) of kindex and, with --peers, of FlashInfer, the ratio harness / kindex bench and a mark where it is
off 1 by more than the threshold. Then per harness and definition: the ratio's median and range, the median
difference harness - kindex bench in µs, and kindex against FlashInfer: under the harness's timing (the baseline
solution's traces) and, with --peers, kernel for kernel (geometric mean of FlashInfer / kindex, kindex's wins).
Exit status 1 when a kindex trace has no kindex run to compare with.
"""

import argparse
import json
import lzma
import math
import statistics
import sys
from pathlib import Path

HARNESSES = (("FlashInfer-Bench", "flashinfer-bench/traces/**/*.jsonl"), ("SOL ExecBench", "sol-execbench/traces.jsonl"))


def read_text(path):
    """A file's text; `*.xz` (how results/ keeps its large JSON) decompressed."""
    return lzma.open(path, "rt").read() if path.suffix == ".xz" else path.read_text()


def read_jsonl(path):
    return [json.loads(line) for line in read_text(path).splitlines() if line.strip()]


def read_runs(path):
    """(implementation, definition, workload uuid) -> (latency µs, timer) of every passed run of a kindex bench."""
    jsonl = path.name.endswith((".jsonl", ".jsonl.xz"))
    runs = read_jsonl(path) if jsonl else json.loads(read_text(path))["results"]
    return {(r["implementation"], r["definition"], r["workload_uuid"]):
            (r["timing"]["summary"]["latency_ns"] / 1e3, r["timing"].get("timer", "?"))
            for r in runs if r.get("status") == "passed"}


def latency_us(trace):
    value = (((trace.get("evaluation") or {}).get("performance") or {}).get("latency_ms"))
    return None if value is None else value * 1e3


def versus(pairs):
    """pairs of (FlashInfer, kindex) latencies -> 'geomean x.xx, kindex faster on n of m'."""
    pairs = [(f, k) for f, k in pairs if f and k]
    if not pairs:
        return None
    geomean = math.exp(statistics.fmean(math.log(f / k) for f, k in pairs))
    return f"FlashInfer / kindex geomean {geomean:.2f}, kindex faster on {sum(f > k for f, k in pairs)} of {len(pairs)}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("harnesses", type=Path)
    parser.add_argument("kindex_results", type=Path)
    parser.add_argument("--peers", type=Path, help="a kindex bench run with the FlashInfer peers")
    parser.add_argument("--threshold", type=float, default=0.10)
    args = parser.parse_args(argv)

    bench = read_runs(args.kindex_results)
    peers = read_runs(args.peers) if args.peers else {}
    print("| harness | definition | workload | status | harness: kindex (µs) | harness: reference (µs) "
          "| harness: FlashInfer (µs) | kindex bench (µs) | kindex bench: FlashInfer (µs) | ratio | |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    cell = lambda v: "—" if v is None else f"{v:.1f}"  # noqa: E731
    summary, unmatched = {}, 0
    for harness, pattern in HARNESSES:
        traces = [t for path in sorted(args.harnesses.glob(pattern)) for t in read_jsonl(path)]
        # Other solutions the harness ran on a workload (the FlashInfer baseline), by workload.
        baseline = {(t["definition"], t["workload"]["uuid"]): latency_us(t)
                    for t in traces if str(t.get("solution", "")).startswith("flashinfer")}
        for t in traces:
            if not str(t.get("solution", "")).startswith("kindex"):
                continue
            ev = t.get("evaluation") or {}
            definition, uuid = t["definition"], t["workload"]["uuid"]
            axes = ", ".join(f"{k}={v}" for k, v in t["workload"]["axes"].items())
            mine = latency_us(t)
            ref = ((ev.get("performance") or {}).get("reference_latency_ms"))
            kernel = (bench.get(("kindex", definition, uuid)) or (None,))[0]
            peer = (peers.get(("flashinfer", definition, uuid)) or (None,))[0]
            if kernel is None:
                unmatched += 1
            ratio = mine / kernel if mine is not None and kernel else None
            off = ratio is not None and abs(ratio - 1) > args.threshold
            s = summary.setdefault((harness, definition), {"ratio": [], "diff": [], "harness": [], "kernel": [],
                                                           "kernel_tc": []})
            if ratio is not None:
                s["ratio"].append(ratio)
                s["diff"].append(mine - kernel)
            s["harness"].append((baseline.get((definition, uuid)), mine))
            # Kernel for kernel: both from the peers' run, so kindex and FlashInfer were timed in the same session.
            kindex_there = (peers.get(("kindex", definition, uuid)) or (None,))[0]
            s["kernel"].append((peer, kindex_there))
            s["kernel_tc"].append(((peers.get(("flashinfer-tc", definition, uuid)) or (None,))[0], kindex_there))
            print(f"| {harness} | {definition} | {axes} | {ev.get('status', '—')} | {cell(mine)} "
                  f"| {cell(None if ref is None else ref * 1e3)} | {cell(baseline.get((definition, uuid)))} "
                  f"| {cell(kernel)} | {cell(peer)} | {'—' if ratio is None else f'{ratio:.2f}'} "
                  f"| {'> ' + format(args.threshold, '.0%') if off else ''} |")
    print()
    for (harness, definition), s in summary.items():
        values = s["ratio"]
        if values:
            outside = sum(abs(r - 1) > args.threshold for r in values)
            print(f"- {harness} {definition}: {len(values)} workloads, ratio harness / kindex bench median "
                  f"{statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}), {outside} off by "
                  f"more than {args.threshold:.0%}; harness - kindex bench median {statistics.median(s['diff']):.1f} µs "
                  f"(min {min(s['diff']):.1f}, max {max(s['diff']):.1f})")
        for label, key in (("under the harness's timing", "harness"), ("kernel for kernel (kindex bench, FlashInfer "
                           "CUDA-core)", "kernel"), ("kernel for kernel (kindex bench, FlashInfer tensor-core)",
                                                     "kernel_tc")):
            line = versus(s[key])
            if line:
                print(f"  - {label}: {line}")
    if unmatched:
        print(f"- {unmatched} traces have no passed kindex run in {args.kindex_results.name}", file=sys.stderr)
    return 1 if unmatched else 0


if __name__ == "__main__":
    raise SystemExit(main())
