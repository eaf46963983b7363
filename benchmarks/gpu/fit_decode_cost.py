#!/usr/bin/env python3
"""Fits the decode cost model's constants (src/kernels/decode/paged_decode.cpp: kCtaBytesPerUs, kPieceUs, kMergeUs,
kMergeUsPerSegment) to a segment-count sweep: bench_decode's JSON (results/decode/run_device.sh sweep) of synthetic cases, each timed at
forced segment counts (variants s1, s2, ...). The model, as choose_segments evaluates it for S segments:

    t(S) = kv_bytes * (chip^-p + (S * kv_heads * cta)^-p)^(1/p) + piece * floor((batch + 2 S - 2) / S)
           + (merge + merge_per_segment * S) * (S > 1) + fixed

(the stream at a smooth minimum of the chip's and the CTAs' rates, p = 4 as the library has it: with a hard minimum
the model saw no gain past the count where the CTAs' rate reaches the chip's, while the measured time kept falling
to one CTA per SM).

`fixed` (launch and the first load's latency) is the same for every S, so it does not move the choice; it is fitted
so that the others are not bent to absorb it. chip is the device's streaming rate (--chip-tb-per-s, default the
best rate any case reached). Prints the constants, then per case the segment count the fitted model picks among all
counts up to the case's one-wave bound (as the library does), the fastest measured one, and what the model's pick
costs against the fastest (the number that matters): the measured time at the swept count nearest the pick.

With --run-only the fit is of the run kernel alone (variants s<n>r1: a layer's call, the plan made once per step):
the library's constants. The plan's own cost (kPlanUs, weighed only by the one-call entry point) is then printed too:
the median over the cases and counts > 1 of plan + run (s<n>) minus run alone (s<n>r1), where the sweep has both.

  python3 benchmarks/gpu/fit_decode_cost.py sweep.json [more.json ...] [--chip-tb-per-s 3.0] [--run-only]
                                            [--json out.json]
"""
import argparse
import json
import math
import pathlib
import re
import statistics
import sys


def cases(docs, run_only=False):
    """[(label, batch, kv_heads, kv_bytes, {segments: median_us})] from bench_decode documents: the plan + run
    variants s<n>, or with run_only the run-alone ones s<n>r1 (a layer's call, the plan made once per step)."""
    out = []
    for doc in docs:
        for row in doc.get("workloads", []):
            m = re.search(r"_kv(\d+)_d(\d+)", row.get("definition", ""))
            if not m:
                continue
            kv_heads, head_dim = int(m[1]), int(m[2])
            kv_bytes = row["kv_tokens"] * kv_heads * head_dim * 2 * 2
            times = {}
            for name, v in row.get("variants", {}).items():
                if re.fullmatch(r"s[1-9]\d*(r1)?", name) and bool(v.get("run_only")) == run_only:
                    times[int(v["num_segments"])] = min(times.get(int(v["num_segments"]), math.inf), v["median_us"])
            if len(times) >= 2:
                out.append((row["label"], int(row["batch_size"]), kv_heads, kv_bytes, times))
    return out


LINEAR = ("piece_us", "merge_us", "merge_us_per_segment", "fixed_us")  # the constants linear in t(S)


def features(c, s):
    """t(S)'s coefficients of the LINEAR constants for case c at S segments."""
    batch = c[1]
    return [(batch + 2 * s - 2) // s, 1.0 if s > 1 else 0.0, float(s) if s > 1 else 0.0, 1.0]


P = 4  # the smooth minimum's exponent (choose_segments in src/kernels/decode/paged_decode.cpp)


def stream_us(c, chip, cta, s):
    return c[3] * ((1.0 / chip) ** P + (1.0 / (s * c[2] * cta)) ** P) ** (1.0 / P)


def model_us(c, chip, cta, piece, merge, merge_per_segment, fixed, s):
    stream = stream_us(c, chip, cta, s)
    return stream + sum(k * f for k, f in zip((piece, merge, merge_per_segment, fixed), features(c, s)))


def solve(m, v):
    """x with m x = v (Gaussian elimination with partial pivoting); None when m is singular."""
    n = len(v)
    a = [list(row) + [v[i]] for i, row in enumerate(m)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][n] / a[i][i] for i in range(n)]


def fit_linear(cs, chip, cta):
    """For one cta: the LINEAR constants >= 0 minimising the squared relative error (linear least squares), and that
    error. Negative solutions are clamped to 0 and the others refitted."""
    points = [(c, s, t) for c in cs for s, t in c[4].items()]
    n = len(LINEAR)
    active = list(range(n))
    while True:
        rows = []
        for c, s, t in points:
            stream = stream_us(c, chip, cta, s)
            f = features(c, s)
            rows.append(([f[i] / t for i in active], (t - stream) / t))
        m = [[sum(r[0][i] * r[0][j] for r in rows) for j in range(len(active))] for i in range(len(active))]
        v = [sum(r[0][i] * r[1] for r in rows) for i in range(len(active))]
        x = solve(m, v) or [0.0] * len(active)
        params = [0.0] * n
        for i, k in enumerate(active):
            params[k] = x[i]
        negative = [k for k in active if params[k] < 0]
        if not negative:
            break
        active = [k for k in active if k not in negative]
        if not active:
            params = [0.0] * n
            break
    err = sum((model_us(c, chip, cta, *params, s) / t - 1) ** 2 for c, s, t in points)
    return tuple(params), err


def fit(cs, chip):
    """cta by a log-grid search refined by golden section; the rest by linear least squares for each cta."""
    def err(log_cta):
        return fit_linear(cs, chip, math.exp(log_cta))[1]

    grid = [math.log(1e4) + k * math.log(2) / 4 for k in range(0, 30)]  # 10 GB/s .. ~1.8 TB/s per CTA
    k = min(range(len(grid)), key=lambda i: err(grid[i]))
    lo, hi = grid[max(0, k - 1)], grid[min(len(grid) - 1, k + 1)]
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if err(a) < err(b):
            hi = b
        else:
            lo = a
    cta = math.exp((lo + hi) / 2)
    linear, e = fit_linear(cs, chip, cta)
    return (cta, *linear), e


def plan_cost(docs):
    """The median over synthetic cases and segment counts > 1 of s<n> (plan + run) minus s<n>r1 (run alone), or
    None where no case has both."""
    diffs = []
    for doc in docs:
        for row in doc.get("workloads", []):
            v = row.get("variants", {})
            for name, x in v.items():
                m = re.fullmatch(r"s([1-9]\d*)", name)
                if m and x.get("num_segments", 1) > 1 and f"{name}r1" in v:
                    diffs.append(x["median_us"] - v[f"{name}r1"]["median_us"])
    return statistics.median(diffs) if diffs else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweeps", nargs="+", help="bench_decode --json files of a sweep")
    ap.add_argument("--chip-tb-per-s", type=float, help="the device's streaming rate (default: best case reached)")
    ap.add_argument("--json", help="write the fit and the per-case table here")
    ap.add_argument("--run-only", action="store_true",
                    help="fit the run-alone timings (variants s<n>r1), as every layer after the plan sees them")
    args = ap.parse_args(argv)
    docs = [json.loads(pathlib.Path(p).read_text()) for p in args.sweeps]
    cs = cases(docs, args.run_only)
    if not cs:
        print("error: no synthetic case with two or more forced segment counts in the input", file=sys.stderr)
        return 1
    chip = (args.chip_tb_per_s * 1e6 if args.chip_tb_per_s
            else max(c[3] / t for c in cs for t in c[4].values()))
    constants, loss = fit(cs, chip)
    cta, piece, merge, merge_per_segment, fixed = constants
    rows = []
    for c in cs:
        label, _, _, _, times = c
        # The library's choice among every count up to the one-wave bound (the largest count the sweep reached),
        # costed at the swept count nearest it.
        choice = min(range(1, max(times) + 1), key=lambda s: model_us(c, chip, *constants, s))
        pick = min(times, key=lambda s: abs(math.log(s / choice)))
        fastest = min(times, key=times.get)
        rows.append({"label": label, "model_choice": choice, "model_segments": pick, "fastest_segments": fastest,
                     "model_pick_us": times[pick], "fastest_us": times[fastest],
                     "pick_over_fastest": times[pick] / times[fastest]})
    geo = math.exp(sum(math.log(r["pick_over_fastest"]) for r in rows) / len(rows))
    print(f"chip {chip / 1e6:.3f} TB/s; fitted: kCtaBytesPerUs = {cta:.4g}, kPieceUs = {piece:.3g}, "
          f"kMergeUs = {merge:.3g}, kMergeUsPerSegment = {merge_per_segment:.3g} (fixed {fixed:.3g} us); squared relative error {loss:.4g} over "
          f"{sum(len(c[4]) for c in cs)} points")
    print(f"{'case':44} {'choice':>7} {'nearest':>8} {'best S':>7} {'model us':>9} {'best us':>8} {'ratio':>6}")
    for r in rows:
        print(f"{r['label']:44} {r['model_choice']:7} {r['model_segments']:8} {r['fastest_segments']:7} {r['model_pick_us']:9.2f} "
              f"{r['fastest_us']:8.2f} {r['pick_over_fastest']:6.3f}")
    print(f"geomean of the model's pick over the fastest measured: {geo:.4f}")
    plan_us = plan_cost(docs) if args.run_only else None
    if plan_us is not None:
        print(f"kPlanUs = {plan_us:.3g} (median of plan + run minus run alone over counts > 1)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"inputs": args.sweeps, "chip_bytes_per_us": chip, "p": P,
             "fit": {"cta_bytes_per_us": cta, "piece_us": piece, "merge_us": merge,
                     "merge_us_per_segment": merge_per_segment, "fixed_us": fixed, "squared_relative_error": loss},
             "cases": rows, "geomean_pick_over_fastest": geo, "plan_us": plan_us}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
