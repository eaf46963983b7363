#!/usr/bin/env python3
"""kindex decode against FlashInfer and PyTorch on the 68 decode seed workloads, in one process, on identical inputs.

For each seed workload (48 gqa_paged_decode_h32_kv4_d128_ps1, 20 gqa_paged_decode_h24_kv4_d128_ps64; axes and
sm_scale from the bundled workload files, page tables from `bench_decode --dump-tables DIR`, i.e. kindex's own
generator) one set of random bf16 q / k_cache / v_cache is drawn and these are timed on it:
  kindex                  kindex_paged_decode through libkindex.so's C ABI (ctypes), workspace sized outside timing;
  flashinfer_tensor_core  FlashInfer BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=True, backend="fa2",
  flashinfer_cuda_core      kv_layout="NHD") and the same with use_tensor_cores=False; paged_kv_cache = (k, v);
                          plan() outside timing, its host time recorded separately (plan_host_us); FlashInfer's lse
                          is base 2, like the definitions'. Without FlashInfer ("import flashinfer" fails) these two
                          are reported "not installed" and the rest still runs;
  gathered_sdpa           K/V rows gathered into a padded batch, one scaled_dot_product_attention (output only);
  reference               the definition's reference loop, exec'd from the bundled definition JSON.
Timing (benchmarks/gpu/devbench.py DeviceTimer): cold L2 (a 2 x L2 buffer zeroed before each call), a GPU spin kernel
enqueued ahead of each timed call so the CUDA-event span excludes the launch overhead (launch_covered says whether
the spin was long enough), 10 warm-up + 50 timed calls, median (the reference loop: 3 + 20; it syncs inside).
Correctness: fresh random inputs on the same page tables, each implementation run once and compared with the
definition's reference (fp32 arithmetic, bf16 output, fp32 lse) by the FlashInfer-Bench rule: an element fails if
|x-y| > 1e-2 AND |x-y|/(|y|+1e-8) > 1e-2, any non-finite value fails, 100% of output and lse elements must pass.
Floor: bytes / the device-to-device copy rate measured in the same run (bytes = every referenced KV row once +
q + output + lse).

  python3 benchmarks/gpu/torch_decode_baselines.py --lib build/lib/libkindex.so --tables DIR --out results.json \
      [--workloads ps1#0-15,ps64] [--quick] [--impls kindex,flashinfer_tensor_core,...] [--spin-us 100]
  python3 benchmarks/gpu/torch_decode_baselines.py --report results.json      # the markdown table for docs/perf/decode.md
Exit status: 0; 1 on any error (CUDA, kindex status, FlashInfer exception, bad table file); 3 when everything ran
but some implementation failed the comparator. The JSON is rewritten after every workload.
"""
import argparse
import gc
import json
import pathlib
import re
import sys
import time
import traceback

import numpy as np

import devbench as db

FIB = db.REPO / "definitions/flashinfer-trace"
SEED_DEFINITIONS = ("gqa_paged_decode_h32_kv4_d128_ps1", "gqa_paged_decode_h24_kv4_d128_ps64")
PREFIX = "gqa_paged_decode_"
PUBLISHED_COPY_RATE = 4.28e12  # H200 device-to-device copy, protocols.md section 4 (recorded next to the measured)
IMPLEMENTATIONS = ("kindex", "flashinfer_tensor_core", "flashinfer_cuda_core", "gathered_sdpa", "reference")
FLASHINFER = {"flashinfer_tensor_core": True, "flashinfer_cuda_core": False}  # name -> use_tensor_cores
FIB_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2, "required_ratio": 1.0}


class TableError(ValueError):
    pass


# ------------------------------------------------------------------------------------------------------------------
# Workloads, page tables, bytes (no GPU needed)
# ------------------------------------------------------------------------------------------------------------------
def definition_json(name):
    return json.loads((FIB / "definitions/gqa_paged" / f"{name}.json").read_text())


def seed_cases():
    """The seed workloads in catalog order; labels as bench_decode writes them (h32_kv4_d128_ps1#7)."""
    cases = []
    for name in SEED_DEFINITIONS:
        consts = {k: v["value"] for k, v in definition_json(name)["axes"].items() if v["type"] == "const"}
        lines = [l for l in (FIB / "workloads/gqa_paged" / f"{name}.jsonl").read_text().splitlines() if l.strip()]
        for i, line in enumerate(lines):
            w = json.loads(line)["workload"]
            cases.append({"definition": name, "label": f"{name[len(PREFIX):]}#{i}", "uuid": w["uuid"],
                          "batch_size": w["axes"]["batch_size"], "num_pages": w["axes"]["num_pages"],
                          "num_kv_indices": w["axes"]["num_kv_indices"],
                          "sm_scale": float(w["inputs"]["sm_scale"]["value"]),
                          "hq": consts["num_qo_heads"], "hkv": consts["num_kv_heads"], "d": consts["head_dim"],
                          "ps": consts["page_size"]})
    return cases


def select_cases(cases, spec):
    """--workloads: comma-separated items, each a label (h32_kv4_d128_ps1#7), a short label (ps1#7), an index
    range (ps1#0-15), a definition (ps64, h24_kv4_d128_ps64) or a uuid."""
    if not spec:
        return cases
    items = [s.strip() for s in spec.split(",") if s.strip()]

    def matches(item, case):
        if item == case["uuid"] or item == case["label"]:
            return True
        definition, index = case["label"].split("#")
        head, _, sel = item.partition("#")
        if head != definition and not definition.endswith("_" + head):
            return False
        if not sel:
            return True
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", sel)
        if not m:
            raise SystemExit(f"--workloads: bad item '{item}' (want e.g. ps1#7, ps1#0-15, ps64 or a full label)")
        return int(m[1]) <= int(index) <= int(m[2] or m[1])

    unmatched = [i for i in items if not any(matches(i, c) for c in cases)]
    if unmatched:
        raise SystemExit(f"--workloads: {', '.join(unmatched)} match(es) no seed workload "
                         f"(labels look like {cases[0]['label']}; items: ps1#7, ps64#0-3, ps1, a uuid)")
    return [c for c in cases if any(matches(i, c) for i in items)]


def load_tables(tables_dir, case):
    """kv_indptr / kv_indices (/ kv_last_page_len for page_size > 1) as bench_decode --dump-tables wrote them:
    raw little-endian int32, DIR/<label>.indptr, .indices, .last. Checked against the workload's axes."""
    base = pathlib.Path(tables_dir)
    ps = case["ps"]

    def read(suffix):
        path = base / (case["label"] + suffix)
        if not path.is_file():
            raise TableError(f"{path}: no such file (write the tables with: bench_decode --dump-tables {base})")
        data = path.read_bytes()
        if len(data) % 4:
            raise TableError(f"{path}: {len(data)} bytes is not a whole number of int32 values")
        return path, np.frombuffer(data, dtype="<i4").astype(np.int32)

    p_ptr, indptr = read(".indptr")
    p_idx, indices = read(".indices")
    p_last, last = read(".last") if ps > 1 else (None, None)
    return check_tables(case, indptr, indices, last, p_ptr, p_idx, p_last)


def check_tables(case, indptr, indices, last, where_indptr="kv_indptr", where_indices="kv_indices",
                 where_last="kv_last_page_len"):
    """The page table against the workload's axes (TableError naming the file and entry); last None for
    page_size 1 (all ones). Returns int32 (indptr, indices, last). benchmarks/gpu/decode_suite.py checks the
    tables it reads from a dataset's safetensors files with this too."""
    batch, ps, num_pages, n = case["batch_size"], case["ps"], case["num_pages"], case["num_kv_indices"]
    p_ptr, p_idx, p_last = where_indptr, where_indices, where_last
    indptr = np.ascontiguousarray(indptr, dtype=np.int32).reshape(-1)
    indices = np.ascontiguousarray(indices, dtype=np.int32).reshape(-1)
    if len(indptr) != batch + 1:
        raise TableError(f"{p_ptr}: kv_indptr has {len(indptr)} entries, want batch_size + 1 = {batch + 1}")
    if indptr[0] != 0:
        raise TableError(f"{p_ptr}: kv_indptr[0] = {indptr[0]}, want 0")
    steps = np.diff(indptr)
    if (steps < 0).any():
        b = int(np.argmax(steps < 0))
        raise TableError(f"{p_ptr}: kv_indptr decreases at [{b + 1}] ({indptr[b]} -> {indptr[b + 1]})")
    if indptr[-1] != len(indices) or len(indices) != n:
        raise TableError(f"{p_idx}: kv_indptr[-1] = {indptr[-1]}, {len(indices)} kv_indices, the workload's "
                         f"num_kv_indices = {n}: all three must agree")
    bad = (indices < 0) | (indices >= num_pages)
    if bad.any():
        i = int(np.argmax(bad))
        raise TableError(f"{p_idx}: kv_indices[{i}] = {indices[i]} outside [0, num_pages = {num_pages})")
    if ps > 1 or last is not None:
        if last is None:
            raise TableError(f"{p_last}: no kv_last_page_len for page_size {ps}")
        last = np.ascontiguousarray(last, dtype=np.int32).reshape(-1)
        if len(last) != batch:
            raise TableError(f"{p_last}: kv_last_page_len has {len(last)} entries, want batch_size = {batch}")
        bad = (last < 1) | (last > ps)
        if bad.any():
            b = int(np.argmax(bad))
            raise TableError(f"{p_last}: kv_last_page_len[{b}] = {last[b]} outside [1, page_size = {ps}]")
    else:
        last = np.ones(batch, np.int32)
    return indptr, indices, last


def kv_rows(indptr, indices, last, ps, num_pages):
    """(tokens summed over sequences, distinct KV rows referenced). Rows used in a page are always a prefix of it:
    page_size for a full page, kv_last_page_len for a sequence's last page; a page shared by several sequences
    counts once, with the longest prefix any of them uses."""
    counts = np.diff(indptr).astype(np.int64)
    nonempty = counts > 0
    tokens = int(((counts[nonempty] - 1) * ps + last[nonempty]).sum())
    used = np.full(len(indices), ps, np.int64)
    used[indptr[1:][nonempty] - 1] = last[nonempty]
    per_page = np.zeros(num_pages, np.int64)
    np.maximum.at(per_page, indices, used)
    return tokens, int(per_page.sum())


def bytes_moved(case, unique_rows, kv_elem=2, q_len=1):
    """Every referenced KV row once (K and V, kv_elem bytes an element: bf16 2, fp8 1) + q + output (bf16) + lse
    (fp32), q_len query rows per request."""
    b, hq, hkv, d = case["batch_size"] * q_len, case["hq"], case["hkv"], case["d"]
    return unique_rows * hkv * d * kv_elem * 2 + 2 * b * hq * d * 2 + b * hq * 4


# ------------------------------------------------------------------------------------------------------------------
# Ratios and summaries (no GPU needed)
# ------------------------------------------------------------------------------------------------------------------
def median_of(row, name):
    r = row.get(name)
    return r.get("median_us") if isinstance(r, dict) else None


def add_ratios(row):
    kx = median_of(row, "kindex")
    tc, cc = median_of(row, "flashinfer_tensor_core"), median_of(row, "flashinfer_cuda_core")
    ratio = lambda a, b: a / b if a and b else None
    row["ratio_kindex_vs_flashinfer_tc"] = ratio(kx, tc)
    row["ratio_kindex_vs_flashinfer_cuda"] = ratio(kx, cc)
    row["ratio_kindex_vs_flashinfer_best"] = ratio(kx, min(tc, cc)) if tc and cc else None
    row["speedup_vs_gathered_sdpa"] = ratio(median_of(row, "gathered_sdpa"), kx)
    row["speedup_factor"] = ratio(median_of(row, "reference"), kx)  # FlashInfer-Bench's name: reference / solution


RATIOS = ("ratio_kindex_vs_flashinfer_tc", "ratio_kindex_vs_flashinfer_cuda", "ratio_kindex_vs_flashinfer_best")


def summarize_definitions(rows):
    out = {}
    for definition in dict.fromkeys(r["definition"] for r in rows):
        rs = [r for r in rows if r["definition"] == definition]
        s = {"workloads": len(rs)}
        for key in RATIOS:
            pairs = [(r[key], r["label"]) for r in rs if r.get(key)]
            if pairs:
                s[key] = {"geomean": db.geomean([v for v, _ in pairs]), "faster": sum(v < 1 for v, _ in pairs),
                          "of": len(pairs), "worst": dict(zip(("ratio", "label"), max(pairs))),
                          "best": dict(zip(("ratio", "label"), min(pairs)))}
        for name in IMPLEMENTATIONS:
            lat = [median_of(r, name) for r in rs if median_of(r, name)]
            verdicts = [r["correctness"][name]["passed"] for r in rs
                        if name in r.get("correctness", {}) and "passed" in r["correctness"][name]]
            if lat or verdicts:
                s[name] = {"geomean_us": db.geomean(lat), "timed": len(lat),
                           "comparator_passed": sum(verdicts), "comparator_checked": len(verdicts)}
        out[definition] = s
    return out


def report(doc):
    from decode_report import same_process_table
    return same_process_table(doc)


# ------------------------------------------------------------------------------------------------------------------
# The device run
# ------------------------------------------------------------------------------------------------------------------
def load_flashinfer():
    try:
        import flashinfer
        return flashinfer, {"status": "ok", "version": getattr(flashinfer, "__version__", "?"),
                            "path": str(pathlib.Path(flashinfer.__file__).parent)}
    except Exception as e:  # noqa: BLE001 -- any import failure means "not installed" here
        return None, {"status": f"not installed: import flashinfer failed: {type(e).__name__}: {e}"}


class Workload:
    """Device tensors of one workload and a callable per implementation, each returning (output, lse or None)."""

    def __init__(self, torch, case, tables, kx, fi_wrappers, impls, seed, plan_repeats, device="cuda"):
        self.torch, self.case, self.plan_repeats = torch, case, plan_repeats
        dev = torch.device(device)
        b, hq, hkv, d, ps, pages = (case[k] for k in ("batch_size", "hq", "hkv", "d", "ps", "num_pages"))
        indptr, indices, last = tables
        self.indptr_h = torch.from_numpy(indptr.copy())
        self.last_h = torch.from_numpy(last.copy())
        self.indptr = self.indptr_h.to(dev)
        self.indices = torch.from_numpy(indices.copy()).to(dev)
        self.last = self.last_h.to(dev)
        self.gen = torch.Generator(device=dev)
        self.sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
        self.q = torch.empty(b, hq, d, dtype=torch.bfloat16, device=dev)
        self.k_cache = torch.empty(pages, ps, hkv, d, dtype=torch.bfloat16, device=dev)
        self.v_cache = torch.empty_like(self.k_cache)
        self.draw(seed)
        self.calls, self.info, self.errors = {}, {}, {}
        self.definition_run = db.exec_reference(definition_json(case["definition"])["reference"],
                                                f"{case['definition']}.json:reference")
        for name in impls:
            try:
                if name == "kindex":
                    self.calls[name] = self.kindex_call(kx)
                elif name in FLASHINFER:
                    if fi_wrappers is not None:
                        self.calls[name] = self.flashinfer_call(name, fi_wrappers[name])
                elif name == "gathered_sdpa":
                    self.calls[name] = self.sdpa_call(indptr, indices, last)
                elif name == "reference":
                    self.calls[name] = self.reference
            except db.KindexError:
                raise
            except Exception as e:  # noqa: BLE001 -- a FlashInfer/PyTorch failure is recorded, the run goes on
                self.errors[name] = f"{type(e).__name__}: {e}"
                traceback.print_exc()

    def draw(self, seed):
        self.gen.manual_seed(seed)
        for t in (self.q, self.k_cache, self.v_cache):
            t.normal_(generator=self.gen)

    def reference(self):
        c = self.case
        if c["ps"] == 1:
            return self.definition_run(self.q, self.k_cache, self.v_cache, self.indptr, self.indices, c["sm_scale"])
        return self.definition_run(self.q, self.k_cache, self.v_cache, self.indptr, self.indices, self.last,
                                   c["sm_scale"])

    def kindex_call(self, kx):
        torch, c = self.torch, self.case
        out = torch.empty_like(self.q)
        lse = torch.empty(c["batch_size"], c["hq"], dtype=torch.float32, device=self.q.device)
        p = db.paged_decode_params(self.q, self.k_cache, self.v_cache, self.indptr, self.indices,
                                   self.last if c["ps"] > 1 else None,  # ps1 definitions have no such input
                                   c["sm_scale"], out, lse, num_kv_indices=c["num_kv_indices"])
        ws_bytes = kx.workspace_size("kindex_paged_decode", p)
        ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8, device=self.q.device)
        stream = torch.cuda.current_stream().cuda_stream
        self.info["kindex"] = {"workspace_bytes": ws_bytes}
        self._keep_kindex = (p, ws)

        def call():
            kx.call("kindex_paged_decode", p, ws.data_ptr(), ws_bytes, stream)
            return out, lse
        return call

    def flashinfer_call(self, name, wrapper):
        torch, c = self.torch, self.case
        plan = lambda: wrapper.plan(self.indptr_h, self.indices, self.last_h, c["hq"], c["hkv"], c["d"], c["ps"],
                                    q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16,
                                    sm_scale=c["sm_scale"])
        self.sync()
        t0 = time.perf_counter()
        plan()  # the first plan of a wrapper JIT-compiles its module (tens of seconds once per run)
        first_s = time.perf_counter() - t0
        host_us = []
        for _ in range(self.plan_repeats):
            self.sync()
            t0 = time.perf_counter()
            plan()
            host_us.append((time.perf_counter() - t0) * 1e6)
        self.sync()
        self.info[name] = {"plan_host_us": db.summarize(host_us), "first_plan_s": first_s,
                           "resolved_backend": str(getattr(wrapper, "resolved_backend", "fa2"))}
        out = torch.empty_like(self.q)
        lse = torch.empty(c["batch_size"], c["hq"], dtype=torch.float32, device=self.q.device)
        kv = (self.k_cache, self.v_cache)
        return lambda: wrapper.run(self.q, kv, out=out, lse=lse, return_lse=True)

    def sdpa_call(self, indptr, indices, last):
        """Token -> cache row map, padded, built here (outside the timed call, like a plan)."""
        torch, c = self.torch, self.case
        import torch.nn.functional as F
        b, ps, hkv, d = c["batch_size"], c["ps"], c["hkv"], c["d"]
        lens, row_lists = [], []
        for i in range(b):
            pages = indices[indptr[i]:indptr[i + 1]].astype(np.int64)
            t = (len(pages) - 1) * ps + int(last[i]) if len(pages) else 0
            tok = np.arange(t, dtype=np.int64)
            row_lists.append(pages[tok // ps] * ps + tok % ps)
            lens.append(t)
        tmax = max(max(lens), 1)
        rows = np.zeros((b, tmax), np.int64)
        for i, r in enumerate(row_lists):
            rows[i, :len(r)] = r
        dev = self.q.device
        rows_t = torch.from_numpy(rows).to(dev)
        mask = (torch.arange(tmax, device=dev)[None, :] < torch.tensor(lens, device=dev)[:, None]).view(b, 1, 1, tmax)
        kf, vf = self.k_cache.view(-1, hkv, d), self.v_cache.view(-1, hkv, d)

        def call():
            kg = kf[rows_t].transpose(1, 2)  # [B, Hkv, Tmax, D]
            vg = vf[rows_t].transpose(1, 2)
            o = F.scaled_dot_product_attention(self.q.unsqueeze(2), kg, vg, attn_mask=mask, scale=c["sm_scale"],
                                               enable_gqa=True)
            return o.squeeze(2), None
        return call


def check_correctness(torch, wl, seed):
    """Fresh random inputs (same page tables); each implementation once against the definition's reference."""
    sync = wl.sync
    wl.draw(seed)
    ref_out, ref_lse = wl.reference()
    sync()
    verdicts = {}
    for name, call in wl.calls.items():
        if name == "reference":
            continue
        try:
            out, lse = call()  # then poison the buffers it returned, so only this call's writes can pass
            out.fill_(float("nan"))
            if lse is not None:
                lse.fill_(float("nan"))
            out, lse = call()
            sync()
        except db.KindexError:
            raise
        except Exception as e:  # noqa: BLE001
            verdicts[name] = {"passed": False, "reason": f"{type(e).__name__}: {e}"}
            wl.errors[name] = verdicts[name]["reason"]
            continue
        reports = [db.compare_fib(out, ref_out, "output", **FIB_TOLERANCE)]
        if lse is not None:
            reports.append(db.compare_fib(lse, ref_lse, "lse", **FIB_TOLERANCE))
        verdicts[name] = dict(db.combine(reports), outputs=reports, lse_checked=lse is not None)
    return verdicts


def run_workload(torch, case, tables, kx, fi_wrappers, args, timer, copy_rate, index, device="cuda"):
    tokens, rows = kv_rows(*tables, case["ps"], case["num_pages"])
    nbytes = bytes_moved(case, rows)
    row = {k: case[k] for k in ("definition", "label", "uuid", "batch_size", "num_pages", "num_kv_indices")}
    row.update(kv_tokens=tokens, kv_rows_unique=rows, bytes=nbytes, floor_us=nbytes / copy_rate * 1e6,
               floor_us_published=nbytes / PUBLISHED_COPY_RATE * 1e6)
    wl = Workload(torch, case, tables, kx, fi_wrappers, args.impls, seed=args.seed + 2 * index,
                  plan_repeats=args.plan_repeats, device=device)
    # --pre-call (diagnostics): the same implementation on its own buffers (same page tables) runs untimed right
    # before each timed call, so the timed kernel finds the GPU set up by its own kind (shared-memory carveout,
    # instruction cache) while its data stay cold.
    twin = (Workload(torch, case, tables, kx, fi_wrappers, [n for n in args.impls if n != "reference"],
                     seed=args.seed + 2 * index + 7, plan_repeats=0, device=device) if args.pre_call else None)
    for name, call in wl.calls.items():
        warmup, iters = (args.ref_warmup, args.ref_iters) if name == "reference" else (args.warmup, args.iters)
        try:
            t = timer.time(call, warmup, iters, pre=twin.calls.get(name) if twin else None)
        except db.KindexError:
            raise
        except Exception as e:  # noqa: BLE001
            wl.errors[name] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
            continue
        t["achieved_tb_per_s"] = nbytes / (t["median_us"] * 1e-6) / 1e12
        t["ratio_to_floor"] = t["median_us"] / row["floor_us"]
        row[name] = dict(t, **wl.info.get(name, {}))
    row["correctness"] = check_correctness(torch, wl, seed=args.seed + 2 * index + 1)
    for name, err in wl.errors.items():
        row.setdefault(name, {})["error"] = err
    for name in FLASHINFER:
        if name in args.impls and fi_wrappers is None:
            row[name] = {"error": "not installed"}
    add_ratios(row)
    del wl  # its callables close over it: collect the cycle before freeing the cache
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return row


def progress_line(row):
    f = lambda name: f"{median_of(row, name):9.2f}" if median_of(row, name) else f"{'-':>9}"
    r = lambda key: f"{row[key]:6.3f}" if row.get(key) else f"{'-':>6}"
    verdict = "".join("P" if v.get("passed") else "F" for v in row["correctness"].values())
    return (f"{row['label']:22s} {row['bytes'] / 1e6:9.2f} MB floor {row['floor_us']:8.2f} | kindex {f('kindex')} "
            f"tc {f('flashinfer_tensor_core')} cuda {f('flashinfer_cuda_core')} sdpa {f('gathered_sdpa')} us | "
            f"k/tc {r('ratio_kindex_vs_flashinfer_tc')} k/cuda {r('ratio_kindex_vs_flashinfer_cuda')} "
            f"k/best {r('ratio_kindex_vs_flashinfer_best')} | comparator {verdict}")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", help="libkindex.so (e.g. build/lib/libkindex.so)")
    ap.add_argument("--tables", help="folder written by bench_decode --dump-tables")
    ap.add_argument("--out", help="JSON output (rewritten after every workload)")
    ap.add_argument("--report", metavar="JSON", help="print the markdown table of a finished run and exit")
    ap.add_argument("--workloads", help="comma-separated: ps1#7, ps1#0-15, ps64, full labels or uuids")
    ap.add_argument("--impls", default=",".join(IMPLEMENTATIONS),
                    help=f"comma-separated subset of {','.join(IMPLEMENTATIONS)} (default: all)")
    ap.add_argument("--quick", action="store_true", help="3 warm-up + 10 timed calls (reference 1 + 3), 2 plans")
    db.run_args(ap, spin_us=100.0, seed=1)
    ap.add_argument("--ref-warmup", type=int, default=3)
    ap.add_argument("--ref-iters", type=int, default=20)
    ap.add_argument("--plan-repeats", type=int, default=5, help="timed plan() calls after the first")
    ap.add_argument("--pre-call", action="store_true",
                    help="diagnostics: each timed call preceded (after the spin, untimed) by the same implementation "
                         "on other buffers")
    args = ap.parse_args(argv)
    if args.report:
        return args
    missing = [f"--{k}" for k in ("lib", "tables", "out") if not getattr(args, k)]
    if missing:
        ap.error(f"{', '.join(missing)} required (or --report JSON)")
    args.impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    unknown = [s for s in args.impls if s not in IMPLEMENTATIONS]
    if unknown:
        ap.error(f"--impls: unknown {', '.join(unknown)} (known: {', '.join(IMPLEMENTATIONS)})")
    if args.quick:
        args.warmup, args.iters, args.ref_warmup, args.ref_iters, args.plan_repeats = 3, 10, 1, 3, 2
    for k in ("iters", "ref_iters"):
        if getattr(args, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        print(report(json.loads(pathlib.Path(args.report).read_text())))
        return 0
    cases = select_cases(seed_cases(), args.workloads)
    try:  # every table is read and checked before the GPU is touched
        tables = {c["label"]: load_tables(args.tables, c) for c in cases}
    except TableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    torch = db.cuda_torch()
    if torch is None:
        return 1
    kx = db.Kindex(args.lib)
    fi, fi_meta = load_flashinfer() if any(n in FLASHINFER for n in args.impls) else (None, {"status": "not requested"})
    print(f"kindex {kx.version} ({args.lib}); flashinfer: {fi_meta['status']} {fi_meta.get('version', '')}", flush=True)
    fi_wrappers = None
    if fi is not None:
        try:
            fi_wrappers = {}
            for name, tc in FLASHINFER.items():  # one 128 MB float workspace each, as FlashInfer recommends
                ws = torch.zeros(128 << 20, dtype=torch.uint8, device="cuda")
                fi_wrappers[name] = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tc,
                                                                          backend="fa2")
            fi_meta.update(backend="fa2", kv_layout="NHD", workspace_bytes=128 << 20)
        except Exception as e:  # noqa: BLE001 -- imported but unusable: reported like "not installed"
            traceback.print_exc()
            fi_wrappers = None
            fi_meta["status"] = f"not installed: BatchDecodeWithPagedKVCacheWrapper failed: {type(e).__name__}: {e}"

    timer = db.DeviceTimer(spin_us=args.spin_us)
    copy = db.measure_copy_rate()
    print(f"copy rate {copy['bytes_per_s'] / 1e12:.3f} TB/s (published H200 {PUBLISHED_COPY_RATE / 1e12} TB/s); "
          f"spin {args.spin_us} us = {timer.spin_cycles} cycles; {len(cases)} workloads", flush=True)
    doc = {"benchmark": "torch_decode_baselines", "command": " ".join([sys.executable] + sys.argv),
           "date_utc": db.now_utc(), "device": db.device_info(),
           "kindex": {"library": str(args.lib), "version": kx.version}, "flashinfer": fi_meta,
           "protocol": dict(timer.protocol(), warmup=args.warmup, iterations=args.iters,
                            reference={"warmup": args.ref_warmup, "iterations": args.ref_iters},
                            plan_repeats=args.plan_repeats, quick=args.quick, pre_call=args.pre_call,
                            order="per workload: " + ", ".join(args.impls) + ", each timed as one block"),
           "copy_rate": copy,
           "floor": {"bytes": "distinct KV rows referenced (K and V) + q + output + lse",
                     "bandwidth_bytes_per_s": copy["bytes_per_s"], "published_bytes_per_s": PUBLISHED_COPY_RATE},
           "correctness": dict(FIB_TOLERANCE, rule="flashinfer-bench", against="the definition's reference run "
                               "(fp32 arithmetic), fresh random inputs on the same page tables"),
           "workloads": [], "summary": {}}
    failed_rc = 0
    index_of = {c["label"]: i for i, c in enumerate(seed_cases())}
    if args.resume:
        done = {r["uuid"] for r in db.resume_rows(doc, args.out, "workloads")}
        cases = [x for x in cases if x["uuid"] not in done]
    for case in cases:
        row = run_workload(torch, case, tables[case["label"]], kx, fi_wrappers, args, timer, copy["bytes_per_s"],
                           index_of[case["label"]])
        doc["workloads"].append(row)
        doc["summary"] = summarize_definitions(doc["workloads"])
        db.write_json(args.out, doc)
        print(progress_line(row), flush=True)
        errors = {k: v["error"] for k, v in row.items() if isinstance(v, dict) and "error" in v
                  and v["error"] != "not installed"}
        for name, err in errors.items():
            print(f"  ERROR {name}: {err}", flush=True)
            failed_rc = 1
        for name, v in row["correctness"].items():
            if not v["passed"]:
                print(f"  COMPARATOR FAIL {name}: {v['reason']}", flush=True)
                failed_rc = failed_rc or 3
    fi_meta["first_plan_s"] = {n: next((r[n]["first_plan_s"] for r in doc["workloads"]
                                        if isinstance(r.get(n), dict) and "first_plan_s" in r[n]), None)
                               for n in FLASHINFER}
    doc["summary"] = summarize_definitions(doc["workloads"])
    db.write_and_report(args.out, doc, report)
    return failed_rc


if __name__ == "__main__":
    db.run_main(main)
