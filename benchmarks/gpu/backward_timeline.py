#!/usr/bin/env python3
"""Where one kindex_gqa_rope_backward call spends its time: the kernel timeline of a cold-L2 call per stream.

For each workload: the bundled definition's inputs (backward_vs_torch.make_inputs), kindex through its C ABI,
5 warm-up calls (cuBLASLt tuning happens there), then --calls calls each preceded by a cold-L2 flush and a device
synchronize, under torch.profiler (CUPTI activity records: every kernel of every stream, libkindex's included). The
call with the median span is reported: its kernels (name, stream, start offset, duration), each stream's busy time,
the span (first kernel start to last kernel end) and the idle gaps on the critical stream. Answers "is the GEMM
chain or the attention part on the critical path, and how much do the streams overlap".

--ncu: instead, bracket ONE warm call per workload with cudaProfilerStart/Stop, to be run under
`ncu --profile-from-start off ...` (see results/backward/run_profile_device.sh).

  python3 benchmarks/gpu/backward_timeline.py --lib build/lib/libkindex.so --workloads 1x128,1x2048 --out t.json
"""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile

import devbench as db
import backward_vs_torch as bvt


def short(name):
    """Kernel names without template arguments and parameter lists (cuBLASLt's are long)."""
    for stop in ("<", "("):
        i = name.find(stop)
        if i > 0:
            name = name[:i]
    return name[:80]


def kernel_events(trace_path):
    events = json.loads(pathlib.Path(trace_path).read_text()).get("traceEvents", [])
    out = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    out.sort(key=lambda e: e["ts"])
    return out


def split_calls(kernels, flush_marker):
    """Kernels between consecutive flush kernels form one call (a device synchronize separates them)."""
    calls, current = [], None
    for k in kernels:
        if flush_marker(k["name"]):
            if current:
                calls.append(current)
            current = []
        elif current is not None:
            current.append(k)
    if current:
        calls.append(current)
    return calls


def describe(call):
    t0 = min(k["ts"] for k in call)
    t1 = max(k["ts"] + k["dur"] for k in call)
    streams = {}
    for k in call:
        s = k.get("args", {}).get("stream", -1)
        streams.setdefault(s, []).append(k)
    per_stream = []
    for s, ks in sorted(streams.items(), key=lambda kv: -sum(k["dur"] for k in kv[1])):
        busy = sum(k["dur"] for k in ks)
        per_stream.append({"stream": s, "kernels": len(ks), "busy_us": busy,
                           "first_start_us": min(k["ts"] for k in ks) - t0,
                           "last_end_us": max(k["ts"] + k["dur"] for k in ks) - t0})
    # Time when no kernel of the call runs anywhere (launch gaps, event waits).
    idle, reach = 0.0, t0
    for k in sorted(call, key=lambda k: k["ts"]):
        if k["ts"] > reach:
            idle += k["ts"] - reach
        reach = max(reach, k["ts"] + k["dur"])
    return {
        "span_us": t1 - t0,
        "kernel_time_sum_us": sum(k["dur"] for k in call),
        "idle_us": idle,
        "streams": per_stream,
        "kernels": [{"name": short(k["name"]), "stream": k.get("args", {}).get("stream", -1),
                     "start_us": round(k["ts"] - t0, 2), "dur_us": round(k["dur"], 2),
                     "grid": k.get("args", {}).get("grid"), "block": k.get("args", {}).get("block")}
                    for k in call],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--workloads", default="1x128,2x128,1x691,1x2048,16x256,4x1024")
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--out")
    ap.add_argument("--ncu", action="store_true", help="bracket one call per workload for ncu; no timeline")
    args = ap.parse_args(argv)

    import torch
    kx = db.Kindex(args.lib)
    defn = bvt.definition()
    flush = torch.empty(2 * int(torch.cuda.get_device_properties(0).L2_cache_size), dtype=torch.uint8, device="cuda")
    doc = {"benchmark": "backward_timeline", "command": " ".join([sys.argv[0]] + (argv or sys.argv[1:])),
           "date_utc": db.now_utc(), "device": db.device_info(), "workloads": []}
    for w in bvt.select(bvt.workloads(), args.workloads):
        inputs = bvt.make_inputs(torch, defn, w["batch_size"], w["seq_len"], seed=200)
        call = bvt.KindexBackward(torch, kx, defn, w, inputs)
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        if args.ncu:
            flush.zero_()
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
            call()
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
            print(f"{w['label']}: one call profiled", flush=True)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            trace = pathlib.Path(tmp) / "trace.json"
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(args.calls):
                    flush.fill_(1)  # the marker kernel between calls (fill: its name is unlike any of kindex's)
                    torch.cuda.synchronize()
                    call()
                    torch.cuda.synchronize()
            prof.export_chrome_trace(str(trace))
            kernels = kernel_events(trace)
        calls = split_calls(kernels, lambda n: "FillFunctor" in n or "fill_kernel" in n)
        described = sorted((describe(c) for c in calls if c), key=lambda d: d["span_us"])
        if not described:
            raise SystemExit(f"{w['label']}: no kernels recorded")
        median = described[len(described) // 2]
        median["spans_us"] = [d["span_us"] for d in described]
        row = {"label": w["label"], "batch_size": w["batch_size"], "seq_len": w["seq_len"], **median}
        doc["workloads"].append(row)
        print(f"{w['label']}: span {median['span_us']:.1f} us (calls {statistics.median(median['spans_us']):.1f} "
              f"median), kernel time {median['kernel_time_sum_us']:.1f} us, idle {median['idle_us']:.1f} us",
              flush=True)
        for s in median["streams"]:
            print(f"  stream {s['stream']}: {s['kernels']} kernels, busy {s['busy_us']:.1f} us, "
                  f"{s['first_start_us']:.1f}..{s['last_end_us']:.1f}", flush=True)
        for k in median["kernels"]:
            print(f"    s{k['stream']:<3} {k['start_us']:8.1f} +{k['dur_us']:7.1f}  {k['name']}", flush=True)
        if args.out:
            db.write_json(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
