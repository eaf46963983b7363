#!/usr/bin/env python3
"""SOL-ExecBench L2/003 (GQA attention-layer backward with RoPE): kindex against the definition's own reference,
eager and under torch.compile, measured in the same run on the same inputs.

The reference is the `run` of the bundled definition JSON (definitions/sol-execbench/L2/003_*/definition.json),
exec'd from its `reference` source, never copied. kindex is kindex_gqa_rope_backward through libkindex.so's C ABI
(ctypes; workspace sized and allocated outside timing). Inputs follow SOL-ExecBench's rules (the same as the C++
generator src/catalog/inputs.cpp): activations randn, *_weight randn / sqrt(fan_in), cos and sin = cos / sin of one
tensor of randn angles clamped to [-pi, pi], attn_weights = softmax over the last axis of fp32 randn rows, cast to
bf16; scaling from the workload file; drawn with torch's generator on the device, seeded --seed for the timed
inputs and --seed + 1 + r for correctness round r.

Timing (benchmarks/gpu/devbench.py DeviceTimer): cold L2 (a 2 x L2 buffer zeroed before each call), a GPU spin kernel ahead
of each timed call so the CUDA-event span excludes the launch of the first kernel (launch_covered says whether the
spin was long enough), 10 warm-up + 50 timed calls, median. torch.compile(dynamic=False) is compiled afresh for
each workload (dynamo reset), outside timing; its compile time is recorded.
SOL score (src/runner/record/floors.hpp): S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)), T_b = the torch.compile time of this
run, T_SOL = max(2 * MACs / 989.4e12, bytes / 4.8e12), MACs = 104,857,600 B S + 16,384 B S^2, bytes = every input
and output once. sol_score_vs_best_pytorch uses min(eager, compile) as T_b (SOL-ExecBench's own choice).
Correctness, --rounds rounds of fresh inputs: the SOL-ExecBench rule (per output, |x-y| <= atol + rtol |y| on
>= 99% of elements, no NaN/inf, not all zeros; atol/rtol = the workload's max_atol/max_rtol) for kindex and for the
bf16 reference against an fp32 evaluation of the reference (the same source on inputs cast to fp32, matmuls in
full fp32; its final .to(bfloat16) rounds each output once), and kindex against the bf16 reference (what the
SOL-ExecBench harness checks).

  python3 benchmarks/gpu/backward_vs_torch.py --lib build/lib/libkindex.so --out results.json \
      [--workloads 1x128,4x1024] [--rounds 10] [--quick] [--spin-us 1000] [--compile-mode default]
  python3 benchmarks/gpu/backward_vs_torch.py --report results.json     # the markdown table for docs/perf/layer_backward.md
Exit status: 0; 1 on any error (CUDA, kindex status, torch.compile failure); 3 when everything ran but a comparison
failed. The JSON is rewritten after every workload.
"""
import argparse
import gc
import json
import lzma
import math
import pathlib
import sys
import time
import traceback

import devbench as db

DEF_DIR = db.REPO / "definitions/sol-execbench/L2/003_grouped_query_attention_with_rope_backward"
PEAK_FLOPS, PEAK_BYTES = 989.4e12, 4.8e12  # H200 datasheet (the issue's and floors.hpp's T_SOL)
SOL_REQUIRED_RATIO = 0.99  # the SOL-ExecBench harness's value (the dataset's required_match_ratio is not used)


# ------------------------------------------------------------------------------------------------------------------
# Definition, workloads, work counts (no GPU needed)
# ------------------------------------------------------------------------------------------------------------------
def definition():
    return json.loads((DEF_DIR / "definition.json").read_text())


def workloads():
    out = []
    for line in (DEF_DIR / "workload.jsonl").read_text().splitlines():
        if line.strip():
            w = json.loads(line)
            out.append({"uuid": w["uuid"], "batch_size": w["axes"]["batch_size"], "seq_len": w["axes"]["seq_len"],
                        "label": f'{w["axes"]["batch_size"]}x{w["axes"]["seq_len"]}',
                        "scaling": float(w["inputs"]["scaling"]["value"]),
                        "atol": float(w["tolerance"]["max_atol"]), "rtol": float(w["tolerance"]["max_rtol"])})
    return out


def select(ws, spec):
    """--workloads: comma-separated BxS labels (1x128) or uuids."""
    if not spec:
        return ws
    items = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [i for i in items if not any(i in (w["label"], w["uuid"]) for w in ws)]
    if unknown:
        raise SystemExit(f"--workloads: {', '.join(unknown)} match(es) no workload "
                         f"(known: {', '.join(w['label'] for w in ws)})")
    return [w for w in ws if w["label"] in items or w["uuid"] in items]


def axes_of(defn, b, s):
    """Every axis of the definition for (batch_size, seq_len): const values, the two vars, expr axes evaluated."""
    axes = {"batch_size": b, "seq_len": s}
    axes.update({k: v["value"] for k, v in defn["axes"].items() if v["type"] == "const"})
    for k, v in defn["axes"].items():
        if v["type"] == "expr":
            axes[k] = eval(v["expression"], {"__builtins__": {}}, dict(axes))  # the bundled definition's arithmetic
    return axes


def shapes(defn, b, s):
    axes = axes_of(defn, b, s)
    tensor = lambda spec: tuple(axes[a] if isinstance(a, str) else a for a in spec["shape"])
    ins = {n: tensor(spec) for n, spec in defn["inputs"].items() if spec.get("shape") is not None}
    outs = {n: tensor(spec) for n, spec in defn["outputs"].items()}
    return ins, outs


def work(defn, b, s):
    """(MACs, bytes, T_SOL seconds, bound): bytes = every input and output once (all bf16)."""
    ins, outs = shapes(defn, b, s)
    nbytes = sum(2 * math.prod(shape) for shape in list(ins.values()) + list(outs.values()))
    macs = 104_857_600 * b * s + 16_384 * b * s * s
    t_flop, t_mem = 2 * macs / PEAK_FLOPS, nbytes / PEAK_BYTES
    return macs, nbytes, max(t_flop, t_mem), "compute" if t_flop >= t_mem else "memory"


def sol_score(t_k, t_sol, t_b):
    """S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)); None when T_b <= T_SOL (the formula has no meaning there)."""
    if t_k is None or t_b is None or t_b <= t_sol:
        return None
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))


# ------------------------------------------------------------------------------------------------------------------
# Device side
# ------------------------------------------------------------------------------------------------------------------
def make_inputs(torch, defn, b, s, seed, device="cuda"):
    """SOL-ExecBench's input rules (see the module docstring), bf16."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    ins, _ = shapes(defn, b, s)
    randn = lambda shape: torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    out, angle = {}, None
    for name, shape in ins.items():
        if name.endswith("_weight") and len(shape) == 2:
            t = randn(shape) / math.sqrt(shape[1])
        elif name in ("cos", "sin"):
            if angle is None or angle.shape != shape:  # one tensor of angles drives both
                angle = randn(shape).clamp_(-math.pi, math.pi)
            t = torch.cos(angle) if name == "cos" else torch.sin(angle)
        elif name == "attn_weights":
            t = torch.softmax(randn(shape), dim=-1)
        else:
            t = randn(shape)
        out[name] = t.to(torch.bfloat16)
    return out


def reference_fn(defn):
    """A fresh function object each call (its own dynamo cache entry)."""
    return db.exec_reference(defn["reference"], "L2/003 definition.json:reference")


def reference_args(inputs, w):
    return [inputs[n] for n in db.BACKWARD_INPUTS] + [w["scaling"]]


class KindexBackward:
    def __init__(self, torch, kx, defn, w, inputs):
        self.torch, self.kx = torch, kx
        _, outs = shapes(defn, w["batch_size"], w["seq_len"])
        dev = inputs["grad_output"].device
        self.outputs = {n: torch.empty(outs[n], dtype=torch.bfloat16, device=dev) for n in db.BACKWARD_OUTPUTS}
        p = db.new_params(db.GqaRopeBackwardParams)
        p.batch_size, p.seq_len, p.scaling = w["batch_size"], w["seq_len"], w["scaling"]
        self.params = p
        self.bind(inputs)
        for n, t in self.outputs.items():
            setattr(p, n, t.data_ptr())
        self.ws_bytes = kx.workspace_size("kindex_gqa_rope_backward", p)
        self.ws = torch.empty(max(self.ws_bytes, 1), dtype=torch.uint8, device=dev)
        self.stream = torch.cuda.current_stream().cuda_stream

    def bind(self, inputs):
        for n in db.BACKWARD_INPUTS:
            t = inputs[n]
            if not t.is_contiguous() or t.dtype != self.torch.bfloat16:
                raise ValueError(f"kindex input {n}: want a contiguous bf16 tensor, got {t.dtype}")
            setattr(self.params, n, t.data_ptr())
        self.inputs = inputs  # keeps them alive while the struct points at them

    def __call__(self):
        self.kx.call("kindex_gqa_rope_backward", self.params, self.ws.data_ptr(), self.ws_bytes, self.stream)
        return tuple(self.outputs[n] for n in db.BACKWARD_OUTPUTS)


def fp32_reference(torch, defn, inputs, w):
    """The reference's own source on inputs cast to fp32, with full-fp32 matmuls (no TF32)."""
    run = reference_fn(defn)
    args = [inputs[n].float() for n in db.BACKWARD_INPUTS] + [w["scaling"]]
    return run(*args)


def compare_outputs(actual, expected, w):
    reports = [db.compare_sol(a, e, n, atol=w["atol"], rtol=w["rtol"], required_ratio=SOL_REQUIRED_RATIO)
               for n, a, e in zip(db.BACKWARD_OUTPUTS, actual, expected)]
    return dict(db.combine(reports), outputs=reports)


def fold_rounds(rounds):
    """Per comparison over all rounds: passed only if every round passed; per output the worst figures."""
    per_output = {}
    for r in rounds:
        for rep in r["outputs"]:
            o = per_output.setdefault(rep["output"], {"min_matched_ratio": 1.0, "max_abs_error": 0.0,
                                                      "max_rel_l2_error": 0.0, "failed_rounds": 0})
            o["min_matched_ratio"] = min(o["min_matched_ratio"], rep["matched_ratio"])
            o["max_abs_error"] = max(o["max_abs_error"], rep["max_abs_error"])
            o["max_rel_l2_error"] = max(o["max_rel_l2_error"], rep.get("rel_l2_error", math.inf))
            o["failed_rounds"] += not rep["passed"]
    failed = [i for i, r in enumerate(rounds) if not r["passed"]]
    return {"passed": not failed, "rounds": len(rounds), "failed_rounds": failed,
            "first_failure": next((r["reason"] for r in rounds if not r["passed"]), None), "outputs": per_output}


def run_workload(torch, defn, w, kx, timer, args, device="cuda"):
    b, s = w["batch_size"], w["seq_len"]
    macs, nbytes, t_sol, bound = work(defn, b, s)
    row = dict(w, macs=macs, flops=2 * macs, bytes=nbytes, t_sol_ms=t_sol * 1e3, t_sol_bound=bound)
    errors = {}
    inputs = make_inputs(torch, defn, b, s, args.seed, device)
    eager = reference_fn(defn)
    ref_args = reference_args(inputs, w)
    calls = {}
    if "eager" in args.impls:
        calls["eager"] = lambda: eager(*ref_args)
    if "compile" in args.impls:
        try:
            torch._dynamo.reset()
            compiled = torch.compile(reference_fn(defn), dynamic=False, mode=args.compile_mode)
            t0 = time.perf_counter()
            compiled(*ref_args)
            if device == "cuda":
                torch.cuda.synchronize()
            row["compile_s"] = time.perf_counter() - t0
            calls["compile"] = lambda: compiled(*ref_args)
        except Exception as e:  # noqa: BLE001 -- recorded; the workload goes on without a compiled baseline
            errors["compile"] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
    kernel = None
    if "kindex" in args.impls:
        kernel = KindexBackward(torch, kx, defn, w, inputs)
        calls["kindex"] = kernel
    for name, call in calls.items():
        if timer is None:  # CPU self-check: one call, no timing
            call()
            continue
        t = timer.time(call, args.warmup, args.iters)
        row[name] = dict(t, median_ms=t["median_us"] * 1e-3,
                         achieved_tflops=2 * macs / (t["median_us"] * 1e-6) / 1e12)
    if kernel is not None and "kindex" in row:
        row["kindex"]["workspace_bytes"] = kernel.ws_bytes
    ms = lambda n: row[n]["median_ms"] if isinstance(row.get(n), dict) and "median_ms" in row[n] else None
    t_k, t_c, t_e = ms("kindex"), ms("compile"), ms("eager")
    row["t_b_ms"] = t_c
    row["sol_score"] = sol_score(t_k, row["t_sol_ms"], t_c)
    best = min(x for x in (t_c, t_e) if x) if (t_c or t_e) else None
    row["sol_score_vs_best_pytorch"] = sol_score(t_k, row["t_sol_ms"], best)
    row["speedup_vs_compile"] = t_c / t_k if t_c and t_k else None
    row["speedup_vs_eager"] = t_e / t_k if t_e and t_k else None

    # Correctness over fresh inputs: round r draws with seed + 1 + r (the timed inputs used seed).
    comparisons = {"kindex_vs_fp32": [], "reference_bf16_vs_fp32": [], "kindex_vs_reference_bf16": []}
    for rnd in range(args.rounds):
        inputs = make_inputs(torch, defn, b, s, args.seed + 1 + rnd, device)
        exact = fp32_reference(torch, defn, inputs, w)
        ref = eager(*reference_args(inputs, w))
        comparisons["reference_bf16_vs_fp32"].append(compare_outputs(ref, exact, w))
        if kernel is not None:
            kernel.bind(inputs)
            for t in kernel.outputs.values():
                t.fill_(float("nan"))  # only this call's writes can pass
            got = kernel()
            comparisons["kindex_vs_fp32"].append(compare_outputs(got, exact, w))
            comparisons["kindex_vs_reference_bf16"].append(compare_outputs(got, ref, w))
        del exact, ref
    row["correctness"] = {k: fold_rounds(v) for k, v in comparisons.items() if v}
    row["correctness"]["rule"] = {"name": "sol-execbench", "atol": w["atol"], "rtol": w["rtol"],
                                  "required_ratio": SOL_REQUIRED_RATIO}
    for name, err in errors.items():
        row.setdefault(name, {})["error"] = err
    del inputs, ref_args, calls, kernel
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return row, errors


def summarize(rows):
    scored = [r["sol_score"] for r in rows if r.get("sol_score") is not None]
    val = lambda r, n: r[n]["median_ms"] if isinstance(r.get(n), dict) and "median_ms" in r[n] else None
    passes = lambda key: sum(r["correctness"][key]["passed"] for r in rows if key in r["correctness"])
    checked = lambda key: sum(key in r["correctness"] for r in rows)
    return {
        "workloads": len(rows),
        "mean_sol_score": sum(scored) / len(scored) if scored else None,
        "min_sol_score": min(scored) if scored else None,
        "workloads_sol_at_least_0_70": sum(x >= 0.70 for x in scored),
        "mean_sol_score_vs_best_pytorch": (lambda xs: sum(xs) / len(xs) if xs else None)(
            [r["sol_score_vs_best_pytorch"] for r in rows if r.get("sol_score_vs_best_pytorch") is not None]),
        "faster_than_compile": sum(1 for r in rows if r.get("speedup_vs_compile") and r["speedup_vs_compile"] > 1),
        "geomean_ms": {n: db.geomean([val(r, n) for r in rows]) for n in ("kindex", "compile", "eager")},
        "comparator_passed": {k: f"{passes(k)}/{checked(k)}" for k in
                              ("kindex_vs_fp32", "reference_bf16_vs_fp32", "kindex_vs_reference_bf16")},
    }


def report(doc):
    """Markdown: one row per workload, then the summary."""
    num = lambda x, f: format(x, f) if isinstance(x, (int, float)) else "-"
    ms = lambda r, n: r[n].get("median_ms") if isinstance(r.get(n), dict) else None
    ok = lambda r, k: ("pass" if r["correctness"][k]["passed"] else "FAIL") if k in r["correctness"] else "-"
    l2 = lambda r, k: num(r["correctness"][k]["outputs"]["grad_hidden_states"]["max_rel_l2_error"], ".4f") \
        if k in r["correctness"] else "-"
    p = doc["protocol"]
    lines = [
        f"Device {doc['device']['name']}, {doc['date_utc']}, kindex {doc['kindex']['version']}, torch "
        f"{doc['device'].get('torch')}, torch.compile mode {p['compile_mode']}. Cold L2, spin {p['spin_us']:g} us "
        f"ahead of each call, {p['warmup']} warm-up + {p['iterations']} timed, median; T_b = torch.compile of this "
        f"run; comparator: SOL-ExecBench rule, {doc['rounds']} rounds of fresh inputs.",
        "",
        "| B x S | eager ms | compile ms | kindex ms | T_SOL ms | SOL score | x compile | TFLOP/s | "
        "kindex vs fp32 | bf16 ref vs fp32 | kindex vs bf16 ref | rel L2 grad_hidden kindex / bf16 ref |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"]
    for r in doc["workloads"]:
        lines.append(
            f"| {r['label']} | {num(ms(r, 'eager'), '.3f')} | {num(ms(r, 'compile'), '.3f')} "
            f"| {num(ms(r, 'kindex'), '.3f')} | {r['t_sol_ms']:.3f} | {num(r.get('sol_score'), '.3f')} "
            f"| {num(r.get('speedup_vs_compile'), '.2f')} "
            f"| {num(r.get('kindex', {}).get('achieved_tflops'), '.0f')} | {ok(r, 'kindex_vs_fp32')} "
            f"| {ok(r, 'reference_bf16_vs_fp32')} | {ok(r, 'kindex_vs_reference_bf16')} "
            f"| {l2(r, 'kindex_vs_fp32')} / {l2(r, 'reference_bf16_vs_fp32')} |")
    s = doc["summary"]
    g = s["geomean_ms"]
    lines += ["",
              f"- Mean SOL score {num(s['mean_sol_score'], '.3f')} (min {num(s['min_sol_score'], '.3f')}, "
              f"{s['workloads_sol_at_least_0_70']}/{s['workloads']} at >= 0.70; against min(eager, compile): "
              f"{num(s['mean_sol_score_vs_best_pytorch'], '.3f')}); faster than torch.compile on "
              f"{s['faster_than_compile']}/{s['workloads']}; geomean kindex {num(g['kindex'], '.3f')} ms, compile "
              f"{num(g['compile'], '.3f')} ms, eager {num(g['eager'], '.3f')} ms.",
              "- Comparator passes: " + ", ".join(f"{k} {v}" for k, v in s["comparator_passed"].items()) + "."]
    covered = [r[n]["launch_covered"] for r in doc["workloads"] for n in ("eager", "compile", "kindex")
               if isinstance(r.get(n), dict) and "launch_covered" in r[n]]
    if covered:
        lines.append(f"- Launch hidden behind the spin on {min(covered) * 100:.0f}%-{max(covered) * 100:.0f}% of "
                     f"timed calls per implementation and workload.")
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", help="libkindex.so (e.g. build/lib/libkindex.so)")
    ap.add_argument("--out", help="JSON output (rewritten after every workload)")
    ap.add_argument("--report", metavar="JSON", help="print the markdown table of a finished run and exit")
    ap.add_argument("--workloads", help="comma-separated BxS labels (1x128,4x1024) or uuids; default all 16")
    ap.add_argument("--impls", default="eager,compile,kindex", help="comma-separated subset of eager,compile,kindex")
    ap.add_argument("--rounds", type=int, default=10, help="correctness rounds of fresh inputs per workload")
    ap.add_argument("--quick", action="store_true", help="3 warm-up + 10 timed calls, 2 correctness rounds")
    db.run_args(ap, spin_us=1000.0, seed=200,
                seed_help="timed inputs' seed (SOL-ExecBench's harness uses 200); correctness round r uses seed + 1 + r")
    ap.add_argument("--compile-mode", default="default", help="torch.compile mode (default, max-autotune, ...)")
    args = ap.parse_args(argv)
    if args.report:
        return args
    missing = [f"--{k}" for k in ("lib", "out") if not getattr(args, k)]
    if missing:
        ap.error(f"{', '.join(missing)} required (or --report JSON)")
    args.impls = [x.strip() for x in args.impls.split(",") if x.strip()]
    bad = [x for x in args.impls if x not in ("eager", "compile", "kindex")]
    if bad:
        ap.error(f"--impls: unknown {', '.join(bad)} (known: eager, compile, kindex)")
    if args.quick:
        args.warmup, args.iters, args.rounds = 3, 10, min(args.rounds, 2)
    if args.iters < 1 or args.rounds < 0:
        ap.error("--iters must be >= 1 and --rounds >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        path = pathlib.Path(args.report)  # results/ keeps these as .json.xz
        print(report(json.loads(lzma.open(path, "rt").read() if path.suffix == ".xz" else path.read_text())))
        return 0
    defn = definition()
    ws = select(workloads(), args.workloads)
    torch = db.cuda_torch()
    if torch is None:
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 evaluation is full fp32
    torch.backends.cudnn.allow_tf32 = False
    kx = db.Kindex(args.lib) if "kindex" in args.impls else None
    timer = db.DeviceTimer(spin_us=args.spin_us)
    print(f"kindex {kx.version if kx else '-'} ({args.lib}); torch {torch.__version__}; {len(ws)} workloads; "
          f"spin {args.spin_us} us = {timer.spin_cycles} cycles", flush=True)
    doc = {"benchmark": "backward_vs_torch", "problem": "sol-execbench L2/003_grouped_query_attention_with_rope_backward",
           "command": " ".join([sys.executable] + sys.argv), "date_utc": db.now_utc(), "device": db.device_info(),
           "kindex": {"library": str(args.lib), "version": kx.version if kx else None},
           "protocol": dict(timer.protocol(), warmup=args.warmup, iterations=args.iters, quick=args.quick,
                            compile_mode=args.compile_mode, compile="torch.compile(dynamic=False) per workload after "
                            "torch._dynamo.reset(); first call (compile) untimed", seed=args.seed),
           "sol": {"t_sol": "max(2 * MACs / 989.4e12, bytes / 4.8e12)", "macs": "104857600*B*S + 16384*B*S^2",
                   "bytes": "every input and output once (bf16)", "t_b": "torch.compile median of this run",
                   "score": "1 / (1 + (T_k - T_SOL) / (T_b - T_SOL))"},
           "rounds": args.rounds, "inputs": "SOL-ExecBench rules (src/catalog/inputs.cpp), torch generator on the "
                                            "device: timed inputs seeded --seed, correctness round r seed + 1 + r",
           "workloads": [], "summary": {}}
    rc = 0
    if args.resume:
        done = {r["uuid"] for r in db.resume_rows(doc, args.out, "workloads")}
        ws = [x for x in ws if x["uuid"] not in done]
    for w in ws:
        row, errors = run_workload(torch, defn, w, kx, timer, args)
        doc["workloads"].append(row)
        doc["summary"] = summarize(doc["workloads"])
        db.write_json(args.out, doc)
        m = lambda n: f"{row[n]['median_ms']:8.3f}" if isinstance(row.get(n), dict) and "median_ms" in row[n] \
            else f"{'-':>8}"
        verdict = " ".join(f"{k}={'pass' if v['passed'] else 'FAIL'}" for k, v in row["correctness"].items()
                           if k != "rule")
        score = f"{row['sol_score']:.3f}" if row.get("sol_score") is not None else "-"
        print(f"{row['label']:>8} eager {m('eager')} compile {m('compile')} kindex {m('kindex')} ms  "
              f"T_SOL {row['t_sol_ms']:.3f}  SOL {score}  {verdict}", flush=True)
        for name, err in errors.items():
            print(f"  ERROR {name}: {err}", flush=True)
            rc = 1
        for k, v in row["correctness"].items():
            if k != "rule" and not v["passed"]:
                print(f"  COMPARATOR FAIL {k}: rounds {v['failed_rounds']}: {v['first_failure']}", flush=True)
                rc = rc or 3
    doc["summary"] = summarize(doc["workloads"])
    db.write_and_report(args.out, doc, report)
    return rc


if __name__ == "__main__":
    db.run_main(main)
