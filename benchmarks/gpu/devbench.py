"""Shared pieces of the Python device benchmarks (benchmarks/gpu/torch_decode_baselines.py, decode_suite.py,
backward_vs_torch.py): libkindex.so through its C ABI (ctypes; the paged-decode params built from tensors), the
cold-L2 CUDA-event timer, the measured copy rate, and the two correctness rules (FlashInfer-Bench, SOL-ExecBench)
exactly as src/compare/compare.hpp states them.

torch is imported lazily (inside the functions that need a GPU), so the table/JSON/comparator parts can be checked
on a machine without CUDA.
"""
import ctypes
import math
import pathlib
import statistics
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------------------------
# libkindex.so (include/kindex/kindex.h). Every params struct begins with struct_size = sizeof(the struct); the
# library refuses any other size (KINDEX_STATUS_INVALID_ARGUMENT naming params.struct_size), which also catches a
# ctypes layout that drifted from the header.
# --------------------------------------------------------------------------------------------------------------
# The params structs and names come from the Python package's ctypes mirror of the header (python/kindex/_capi.py:
# no torch, no library load at import), so the two cannot drift apart.
sys.path.insert(0, str(REPO / "python"))
from kindex._capi import DTYPE_BF16 as KINDEX_DTYPE_BF16  # noqa: E402
from kindex._capi import DTYPE_FP16 as KINDEX_DTYPE_FP16  # noqa: E402
from kindex._capi import GQA_ROPE_BACKWARD_INPUTS as BACKWARD_INPUTS  # noqa: E402
from kindex._capi import GQA_ROPE_BACKWARD_OUTPUTS as BACKWARD_OUTPUTS  # noqa: E402
from kindex._capi import GqaRopeBackwardParams, PagedDecodeParams  # noqa: E402,F401
from kindex._capi import (KV_FORMAT_FP8_E4M3, KV_FORMAT_FP8_E5M2, KV_FORMAT_SAME_AS_Q, KV_LAYOUT_HND,  # noqa: E402
                          KV_LAYOUT_NHD, POS_ENCODING_NONE, POS_ENCODING_ROPE_LLAMA)


def new_params(cls):
    """A params struct as the header's *_PARAMS_INIT gives it: struct_size and the defaults set, the rest zero."""
    return cls()


class KindexError(RuntimeError):
    pass


# kindex_paged_decode_plan / kindex_paged_decode_run: the plan (page-table work, once per batch step) and the
# attention (once per layer), where the library exports them.
PAGED_DECODE_SPLIT = ("kindex_paged_decode_plan", "kindex_paged_decode_run")


def paged_decode_params(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, output, lse,
                        num_kv_indices=None, validate=0, kv_layout="NHD", q_len_per_req=1, sinks=None,
                        pos_encoding_mode="NONE", **scalars):
    """kindex_paged_decode_params for torch tensors (shapes as include/kindex/kindex.h: q [B * q_len_per_req, Hq,
    D], caches [pages, page_size, Hkv, D] (NHD) or [pages, Hkv, page_size, D] (HND) in q's dtype or fp8, int32 page
    table on the same device, output like q, lse [B * q_len_per_req, Hq] fp32 or None). kv_last_page_len None:
    every last page is full (the ps1 definitions have no such input). The variant in FlashInfer's names
    (kv_layout, q_len_per_req, sinks, pos_encoding_mode; scalars: k_scale, v_scale, window_left, logits_soft_cap,
    rope_scale, rope_theta). The struct holds raw pointers: the caller keeps the tensors alive while it is used."""
    import torch
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"q: dtype {q.dtype}, kindex takes bfloat16 or float16")
    p = new_params(PagedDecodeParams)
    p.dtype = KINDEX_DTYPE_BF16 if q.dtype == torch.bfloat16 else KINDEX_DTYPE_FP16
    p.kv_format = {torch.float8_e4m3fn: KV_FORMAT_FP8_E4M3, torch.float8_e5m2: KV_FORMAT_FP8_E5M2}.get(
        k_cache.dtype, KV_FORMAT_SAME_AS_Q)
    p.kv_layout = KV_LAYOUT_HND if kv_layout == "HND" else KV_LAYOUT_NHD
    p.q_len_per_req = q_len_per_req
    rows, p.num_qo_heads, p.head_dim = q.shape
    p.batch_size = rows // q_len_per_req
    if kv_layout == "HND":
        p.num_pages, p.num_kv_heads, p.page_size = k_cache.shape[:3]
    else:
        p.num_pages, p.page_size, p.num_kv_heads = k_cache.shape[:3]
    p.num_kv_indices = kv_indices.numel() if num_kv_indices is None else num_kv_indices
    p.q, p.k_cache, p.v_cache = q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr()
    p.kv_indptr, p.kv_indices = kv_indptr.data_ptr(), kv_indices.data_ptr()
    p.kv_last_page_len = kv_last_page_len.data_ptr() if kv_last_page_len is not None else None
    p.sm_scale = float(sm_scale)
    p.output = output.data_ptr()
    p.lse = lse.data_ptr() if lse is not None else None
    p.validate = int(validate)
    p.sinks = sinks.data_ptr() if sinks is not None else None
    p.pos_encoding = POS_ENCODING_ROPE_LLAMA if pos_encoding_mode == "ROPE_LLAMA" else POS_ENCODING_NONE
    for name, value in scalars.items():  # a misspelt name must not pass unnoticed
        if not hasattr(p, name):
            raise TypeError(f"paged_decode_params: unknown field {name!r}")
        setattr(p, name, value)
    return p


class Kindex:
    """libkindex.so loaded with ctypes; every call's status is checked (KindexError with kindex_last_error())."""

    def __init__(self, path):
        path = pathlib.Path(path)
        if not path.is_file():
            raise KindexError(f"--lib {path}: no such file (build it with: cmake --build build --target kindex_shared)")
        try:
            self.lib = ctypes.CDLL(str(path.resolve()))
        except OSError as e:
            raise KindexError(f"--lib {path}: cannot load: {e}") from e
        lib = self.lib
        lib.kindex_last_error.restype = ctypes.c_char_p
        lib.kindex_last_error.argtypes = []
        lib.kindex_version.restype = ctypes.c_char_p
        lib.kindex_version.argtypes = []
        lib.kindex_status_name.restype = ctypes.c_char_p
        lib.kindex_status_name.argtypes = [ctypes.c_int]
        for fn, params in (("kindex_paged_decode", PagedDecodeParams),
                           ("kindex_gqa_rope_backward", GqaRopeBackwardParams)):
            size_fn = getattr(lib, fn + "_workspace_size")
            size_fn.restype = ctypes.c_int
            size_fn.argtypes = [ctypes.POINTER(params), ctypes.POINTER(ctypes.c_size_t)]
            call_fn = getattr(lib, fn)
            call_fn.restype = ctypes.c_int
            call_fn.argtypes = [ctypes.POINTER(params), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        # Optional split entry points (same signature as kindex_paged_decode; workspace sized by
        # kindex_paged_decode_workspace_size): a library that exports both gets has_plan_run, one that does not is
        # called through kindex_paged_decode alone.
        self.optional = {}
        for fn in PAGED_DECODE_SPLIT:
            try:
                call_fn = getattr(lib, fn)
            except AttributeError:
                continue
            call_fn.restype = ctypes.c_int
            call_fn.argtypes = [ctypes.POINTER(PagedDecodeParams), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
            self.optional[fn] = call_fn
        self.has_plan_run = all(fn in self.optional for fn in PAGED_DECODE_SPLIT)
        self.version = lib.kindex_version().decode()

    def check(self, status, what):
        if status != 0:
            name = self.lib.kindex_status_name(status).decode()
            raise KindexError(f"{what}: {name} ({status}): {self.lib.kindex_last_error().decode()}")

    def workspace_size(self, fn, params):
        n = ctypes.c_size_t(0)
        self.check(getattr(self.lib, fn + "_workspace_size")(ctypes.byref(params), ctypes.byref(n)),
                   fn + "_workspace_size")
        return n.value

    def call(self, fn, params, workspace_ptr, workspace_bytes, stream_ptr):
        fn_ptr = self.optional.get(fn) or getattr(self.lib, fn)
        self.check(fn_ptr(ctypes.byref(params), ctypes.c_void_p(workspace_ptr or None),
                          ctypes.c_size_t(workspace_bytes), ctypes.c_void_p(stream_ptr or None)), fn)


# --------------------------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------------------------
def summarize(samples_us):
    """median / min / p05 / p95 / mean of a list of microsecond samples (bench_decode's quantile rule)."""
    s = sorted(samples_us)
    at = lambda q: s[int(round(q * (len(s) - 1)))]
    return {"median_us": statistics.median(s), "min_us": s[0], "p05_us": at(0.05), "p95_us": at(0.95),
            "mean_us": sum(s) / len(s), "iterations": len(s)}


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return statistics.geometric_mean(xs) if xs else None


# --------------------------------------------------------------------------------------------------------------
# Timing on the device
# --------------------------------------------------------------------------------------------------------------
class DeviceTimer:
    """Cold-L2 CUDA-event timing with the launch overhead kept out of the span.

    Each timed call is enqueued as: zero a 2 x L2 buffer (evicts the call's data from L2), a GPU spin kernel of
    spin_us (torch.cuda._sleep), start event, the call, stop event. The host enqueues the start event and the call
    while the GPU is still spinning, so the start event fires when the spin ends with the call's kernels already
    queued behind it: the span is GPU time from the first kernel's start to the last one's end, not the host's
    launch latency. Whether the spin was long enough is recorded per call: the host time from the end of the spin's
    enqueue to the stop event's enqueue must be below the spin (launch_covered = the fraction of timed calls where it
    was). A call that synchronizes inside (the definition's reference loop calls .item()) cannot be covered; its
    span includes host time, as before.
    """

    def __init__(self, spin_us=100.0, flush=True):
        import torch
        self.torch = torch
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.l2_bytes = int(getattr(props, "L2_cache_size", 50 << 20))
        self.flush_bytes = 2 * self.l2_bytes if flush else 0
        self.flush = torch.empty(max(self.flush_bytes, 16), dtype=torch.uint8, device="cuda")
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)
        self.spin_us = float(spin_us)
        self.cycles_per_us = self._calibrate_spin() if spin_us > 0 else 0.0
        self.spin_cycles = int(self.spin_us * self.cycles_per_us)

    def _calibrate_spin(self):
        torch = self.torch
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # first launch loads the kernel
        torch.cuda.synchronize()
        ms = []
        for _ in range(5):
            self.start.record()
            torch.cuda._sleep(cycles)
            self.stop.record()
            self.stop.synchronize()
            ms.append(self.start.elapsed_time(self.stop))
        return cycles / (statistics.median(ms) * 1e3)

    def time(self, fn, warmup, iters, pre=None):
        """`pre` (diagnostics): enqueued after the spin, before the start event, untimed."""
        torch = self.torch
        samples, covered = [], 0
        torch.cuda.synchronize()
        for i in range(warmup + iters):
            if self.flush_bytes:
                self.flush.zero_()
            if self.spin_cycles:
                torch.cuda._sleep(self.spin_cycles)
            if pre is not None:
                pre()
            t0 = time.perf_counter()
            self.start.record()
            fn()
            self.stop.record()
            host_us = (time.perf_counter() - t0) * 1e6
            self.stop.synchronize()
            if i >= warmup:
                samples.append(self.start.elapsed_time(self.stop) * 1e3)
                covered += host_us < self.spin_us
        out = summarize(samples)
        out["warmup"] = warmup
        out["launch_covered"] = covered / iters
        return out

    def protocol(self):
        return {"cold_l2": self.flush_bytes > 0, "flush": "zero a 2 x L2 buffer before each call",
                "flush_bytes": self.flush_bytes, "timer": "cuda_events", "statistic": "median",
                "spin_us": self.spin_us, "spin_cycles": self.spin_cycles,
                "spin": "torch.cuda._sleep enqueued ahead of each timed call: the span excludes the host's launch "
                        "overhead when launch_covered is 1 (host enqueue time < spin)"}


def measure_copy_rate(nbytes=1 << 30, warmup=3, iters=20):
    """Device-to-device copy rate (bytes read + bytes written per second, as protocols.md measures 4.28 TB/s):
    median over CUDA-event spans of dst.copy_(src) on nbytes buffers (far above L2)."""
    import torch
    src = torch.ones(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(warmup + iters):
        start.record()
        dst.copy_(src)
        stop.record()
        stop.synchronize()
        if i >= warmup:
            ms.append(start.elapsed_time(stop))
    t = statistics.median(ms) * 1e-3
    del src, dst
    torch.cuda.empty_cache()
    return {"bytes_per_s": 2.0 * nbytes / t, "copy_bytes": nbytes, "median_ms": t * 1e3, "iterations": iters,
            "method": "torch dst.copy_(src) on the device, 2 x bytes / median CUDA-event span"}


def device_info():
    import torch
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"name": p.name, "sm_count": p.multi_processor_count,
            "l2_bytes": int(getattr(p, "L2_cache_size", 0)), "memory_bytes": int(p.total_memory),
            "capability": f"{p.major}.{p.minor}", "torch": torch.__version__, "cuda": torch.version.cuda}


# --------------------------------------------------------------------------------------------------------------
# Correctness rules (src/compare/compare.hpp). Both cast solution x and reference y to fp32 and work in fp32.
# --------------------------------------------------------------------------------------------------------------
def _prepare(x, y, output):
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"{output}: solution shape {tuple(x.shape)} differs from the reference's {tuple(y.shape)}")
    return x.detach().float().reshape(-1), y.detach().float().reshape(-1)


def _max(t):
    """torch.max semantics (NaN wins); 0 for an empty tensor."""
    return float(t.max()) if t.numel() else 0.0


def compare_fib(x, y, output, atol=1e-2, rtol=1e-2, required_ratio=1.0):
    """FlashInfer-Bench: any non-finite solution element fails; an element fails only if |x-y| > atol AND
    |x-y| / (|y| + 1e-8) > rtol; matched_ratio must be >= required_ratio (1.0: every element)."""
    import torch
    x, y = _prepare(x, y, output)
    n = x.numel()
    finite = torch.isfinite(x)
    nonfinite = int((~finite).sum())
    err = (x - y).abs()
    rel = err / (y.abs() + 1e-8)
    fail = ~finite | ((err > atol) & (rel > rtol))
    mismatches = int(fail.sum())
    r = {"output": output, "rule": "flashinfer-bench", "numel": n, "mismatches": mismatches, "nonfinite": nonfinite,
         "matched_ratio": min(max(1.0 - mismatches / n, 0.0), 1.0) if n else 1.0}
    if nonfinite:
        r["max_abs_error"] = r["max_rel_error"] = math.inf if bool(torch.isinf(x).any()) else math.nan
        r["passed"] = False
        r["reason"] = f"{nonfinite} non-finite value(s) in the solution"
    else:
        r["max_abs_error"], r["max_rel_error"] = _max(err), _max(rel)
        r["passed"] = r["matched_ratio"] >= required_ratio
        r["reason"] = "ok" if r["passed"] else (
            f"{mismatches} of {n} elements exceed both atol={atol:g} and rtol={rtol:g} "
            f"(matched {r['matched_ratio']:.6f} < {required_ratio:g})")
    if mismatches:
        i = int(fail.nonzero()[0, 0])
        r["first_failure"] = {"index": i, "actual": float(x[i]), "expected": float(y[i])}
    return r


def compare_sol(x, y, output, atol=1e-2, rtol=1e-2, required_ratio=0.99, max_error_cap=None):
    """SOL-ExecBench: any NaN/inf in solution or reference fails; an all-zero solution against a non-zero
    reference fails; an element matches if |x-y| <= atol + rtol*|y|; matched_ratio must be >= required_ratio (0.99,
    the harness's value); max_rel = max |x-y| / max(|y|, atol)."""
    import torch
    x, y = _prepare(x, y, output)
    n = x.numel()
    x_nonfinite, y_nonfinite = int((~torch.isfinite(x)).sum()), int((~torch.isfinite(y)).sum())
    err = (x - y).abs()
    fail = (err > atol + rtol * y.abs()) | ~torch.isfinite(err)
    mismatches = int(fail.sum())
    r = {"output": output, "rule": "sol-execbench", "numel": n, "mismatches": mismatches, "nonfinite": x_nonfinite,
         "reference_nonfinite": y_nonfinite,
         "matched_ratio": min(max(1.0 - mismatches / n, 0.0), 1.0) if n else 1.0}
    if x_nonfinite or y_nonfinite:
        any_nan = bool(torch.isnan(x).any() or torch.isnan(y).any())
        r["max_abs_error"] = r["max_rel_error"] = math.nan if any_nan else math.inf
        r["passed"] = False
        r["reason"] = f"non-finite values: {x_nonfinite} in the solution, {y_nonfinite} in the reference"
        return r
    if n and not bool((x != 0).any()) and bool((y != 0).any()):
        norm = float(torch.linalg.vector_norm(y.double()))
        r["max_abs_error"] = r["max_rel_error"] = norm
        r["passed"] = False
        r["reason"] = "the solution is all zeros while the reference is not"
        return r
    r["max_abs_error"] = _max(err)
    r["max_rel_error"] = _max(err / torch.clamp(y.abs(), min=atol))
    # relative L2 error, for reading (no rule uses it)
    ynorm = float(torch.linalg.vector_norm(y.double()))
    r["rel_l2_error"] = float(torch.linalg.vector_norm((x - y).double())) / ynorm if ynorm else 0.0
    r["passed"] = r["matched_ratio"] >= required_ratio
    if not r["passed"]:
        r["reason"] = (f"matched ratio {r['matched_ratio']:.6f} < {required_ratio:g}: {mismatches} of {n} elements "
                       f"outside atol={atol:g} + rtol={rtol:g}*|ref|")
    elif max_error_cap is not None and r["max_abs_error"] > max_error_cap:
        r["passed"] = False
        r["reason"] = f"max abs error {r['max_abs_error']:.8g} above the cap {max_error_cap:g}"
    else:
        r["reason"] = "ok"
    return r


def combine(reports):
    """Folds several outputs' reports as the harnesses do: passed only if every one passed."""
    failed = [r for r in reports if not r["passed"]]
    return {"passed": not failed, "reason": f'{failed[0]["output"]}: {failed[0]["reason"]}' if failed else "ok",
            "max_abs_error": max((r["max_abs_error"] for r in reports), default=0.0),
            "min_matched_ratio": min((r["matched_ratio"] for r in reports), default=1.0)}


def exec_reference(source, where):
    """The `run` function of a definition's reference source (exec'd from the bundled JSON, never copied)."""
    namespace = {}
    exec(compile(source, where, "exec"), namespace)
    return namespace["run"]


def json_safe(obj):
    """Non-finite floats as the strings "inf", "-inf", "nan" (strict JSON has no such numbers)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_json(path, doc):
    import json
    tmp = pathlib.Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False) + "\n")
    tmp.replace(path)


def write_and_report(path, doc, report):
    """A benchmark run's end: the JSON written, its report (a function of the document) printed, the path named."""
    write_json(path, doc)
    print()
    print(report(doc))
    print(f"wrote {path}")


def run_main(main):
    """A benchmark's entry point: exits with main()'s status; a KindexError is printed as "error: ..." (exit 1)."""
    try:
        sys.exit(main())
    except KindexError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def resume_rows(doc, out, key, keep=lambda row: True):
    """--resume: the rows under doc[key] that an earlier run left in `out` and `keep` accepts, moved into doc (with
    a note of that run in doc["resumed"]); returns them ([] when `out` does not exist yet)."""
    import json
    path = pathlib.Path(out)
    if not path.is_file():
        return []
    earlier = json.loads(path.read_text())
    kept = [r for r in earlier.get(key, []) if keep(r)]
    doc[key] = kept
    doc["resumed"] = earlier.get("resumed", []) + [{"date_utc": earlier.get("date_utc"),
                                                     "command": earlier.get("command"), key: len(kept)}]
    if "seed" in doc and earlier.get("seed") != doc["seed"]:
        print(f"warning: --resume: {out} was run with seed {earlier.get('seed')}, this run {doc['seed']}", flush=True)
    print(f"--resume: {len(kept)} {key} kept from {out}", flush=True)
    return kept


def cuda_torch():
    """torch with a CUDA device, or None after saying why on stderr."""
    try:
        import torch
    except ImportError as e:
        print(f"error: import torch failed: {e}", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print("error: no CUDA device visible to torch", file=sys.stderr)
        return None
    return torch


def run_args(ap, spin_us, seed, seed_help="inputs' seed", spin_help="GPU spin ahead of each timed call (0: none)"):
    """The flags every benchmark here takes: --warmup, --iters, --spin-us (timing), --seed, and --resume (rows
    already in --out are kept, the rest run: a run cut short, or split over device calls)."""
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--spin-us", type=float, default=spin_us, help=spin_help)
    ap.add_argument("--seed", type=int, default=seed, help=seed_help)
    ap.add_argument("--resume", action="store_true", help="keep what --out already holds and run the rest")


def now_utc():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
