#!/usr/bin/env python3
"""PyTorch baselines for the 68 decode seed workloads, on the same page tables bench_decode used.

  (a) gathered-KV SDPA: K/V rows gathered into a padded [B, Hkv, Tmax, D] batch (the token -> row map is built
      outside the timed call, like a plan), then one torch.nn.functional.scaled_dot_product_attention call with a
      key-padding mask and enable_gqa=True (output only; SDPA returns no lse);
  (b) the definition's reference: its per-sequence fp32 loop, run from the bundled definition JSON (ps1, ps64).
Timing as bench_decode: cold L2 (2 x L2-size buffer zeroed before each call), CUDA events around each call,
median. SDPA: 10 warm-up, 50 timed; the reference loop (tens of ms a call): 3 warm-up, 20 timed.

  python3 bench/torch_decode_baselines.py --kindex bench.json --tables DIR --out baselines.json \
      [--combined combined.json]
The combined file is bench_decode's JSON with each workload's baseline times and speedup factors added.
"""
import argparse
import json
import math
import pathlib
import re
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F


DEFINITIONS = pathlib.Path(__file__).resolve().parent.parent / "definitions/flashinfer-trace/definitions/gqa_paged"


def definition_reference(hq, hkv, d, ps):
    """The definition's own reference `run`, executed from the bundled definition JSON rather than copied here."""
    path = DEFINITIONS / f"gqa_paged_decode_h{hq}_kv{hkv}_d{d}_ps{ps}.json"
    namespace = {}
    exec(compile(json.load(open(path))["reference"], str(path), "exec"), namespace)
    return namespace["run"]


def time_cold(fn, flush, warmup, iters):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(warmup + iters):
        flush.zero_()
        torch.cuda.synchronize()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= warmup:
            out.append(start.elapsed_time(stop) * 1e3)  # us
    return {"median_us": statistics.median(out), "min_us": min(out), "iterations": iters, "warmup": warmup}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kindex", required=True, help="bench_decode JSON (workload list and kindex timings)")
    ap.add_argument("--tables", required=True, help="bench_decode --dump-tables folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--combined")
    args = ap.parse_args()

    bench = json.load(open(args.kindex))
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    flush = torch.empty(2 * l2, dtype=torch.uint8, device=dev)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1)
    rows_out = []
    for w in bench["workloads"]:
        m = re.match(r"h(\d+)_kv(\d+)_d(\d+)_ps(\d+)#", w["label"])
        hq, hkv, d, ps = map(int, m.groups())
        base = f'{args.tables}/{w["label"]}'
        indptr = torch.from_numpy(np.fromfile(base + ".indptr", dtype=np.int32)).to(dev)
        indices = torch.from_numpy(np.fromfile(base + ".indices", dtype=np.int32)).to(dev)
        last = (torch.from_numpy(np.fromfile(base + ".last", dtype=np.int32)).to(dev) if ps > 1
                else torch.ones(w["batch_size"], dtype=torch.int32, device=dev))
        batch, num_pages = w["batch_size"], w["num_pages"]
        q = torch.randn(batch, hq, d, dtype=torch.bfloat16, device=dev, generator=gen)
        k_cache = torch.randn(num_pages, ps, hkv, d, dtype=torch.bfloat16, device=dev, generator=gen)
        v_cache = torch.randn(num_pages, ps, hkv, d, dtype=torch.bfloat16, device=dev, generator=gen)
        sm_scale = 1.0 / math.sqrt(d)

        # Token -> cache row map, padded (outside the timed call).
        ip, ix, ll = indptr.cpu().numpy(), indices.cpu().numpy().astype(np.int64), last.cpu().numpy()
        lens = []
        row_lists = []
        for b in range(batch):
            pages = ix[ip[b]:ip[b + 1]]
            if len(pages) == 0:
                row_lists.append(np.zeros(0, np.int64))
                lens.append(0)
                continue
            t = (len(pages) - 1) * ps + int(ll[b])
            tok = np.arange(t, dtype=np.int64)
            row_lists.append(pages[tok // ps] * ps + tok % ps)
            lens.append(t)
        tmax = max(max(lens), 1)
        rows = np.zeros((batch, tmax), np.int64)
        for b, r in enumerate(row_lists):
            rows[b, :len(r)] = r
        rows_t = torch.from_numpy(rows).to(dev)
        mask = (torch.arange(tmax, device=dev)[None, :] < torch.tensor(lens, device=dev)[:, None]).view(batch, 1, 1, tmax)

        kf, vf = k_cache.view(-1, hkv, d), v_cache.view(-1, hkv, d)

        def sdpa():
            kg = kf[rows_t].transpose(1, 2)  # [B, Hkv, Tmax, D]
            vg = vf[rows_t].transpose(1, 2)
            return F.scaled_dot_product_attention(q.unsqueeze(2), kg, vg, attn_mask=mask, scale=sm_scale,
                                                  enable_gqa=True)

        run_reference = definition_reference(hq, hkv, d, ps)
        if ps == 1:
            ref = lambda: run_reference(q, k_cache, v_cache, indptr, indices, sm_scale)
        else:
            ref = lambda: run_reference(q, k_cache, v_cache, indptr, indices, last, sm_scale)

        # Sanity: the two baselines agree (they are timed, so they must compute the same thing).
        o_ref, _ = ref()
        o_sdpa = sdpa().squeeze(2).to(torch.bfloat16)
        agree = float((o_ref.float() - o_sdpa.float()).abs().max())

        t_sdpa = time_cold(sdpa, flush, 10, 50)
        t_ref = time_cold(ref, flush, 3, 20)
        kx = w["kindex"]["median_us"]
        row = {"label": w["label"], "uuid": w["uuid"], "gathered_sdpa": t_sdpa, "reference": t_ref,
               "sdpa_vs_reference_max_abs_diff": agree,
               "speedup_vs_gathered_sdpa": t_sdpa["median_us"] / kx, "speedup_vs_reference": t_ref["median_us"] / kx}
        rows_out.append(row)
        w["baselines"] = {"gathered_sdpa": t_sdpa, "reference": t_ref}
        w["speedup_vs_gathered_sdpa"] = row["speedup_vs_gathered_sdpa"]
        w["speedup_factor"] = row["speedup_vs_reference"]  # FlashInfer-Bench's name: reference / solution
        print(f'{w["label"]:24s} kindex {kx:9.2f} us  sdpa {t_sdpa["median_us"]:9.2f} us  ref {t_ref["median_us"]:10.1f} us'
              f'  x{row["speedup_vs_gathered_sdpa"]:6.1f} x{row["speedup_vs_reference"]:7.1f}  (diff {agree:.3g})',
              flush=True)
        del k_cache, v_cache, kf, vf, rows_t
        torch.cuda.empty_cache()

    meta = {"script": "bench/torch_decode_baselines.py", "torch": torch.__version__, "device": props.name,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "protocol": {"cold_l2": True, "timer": "cuda_events", "statistic": "median",
                         "gathered_sdpa": {"warmup": 10, "iterations": 50},
                         "reference": {"warmup": 3, "iterations": 20}}}
    json.dump({**meta, "workloads": rows_out}, open(args.out, "w"), indent=1)
    if args.combined:
        bench["baselines"] = meta
        json.dump(bench, open(args.combined, "w"), indent=1)


if __name__ == "__main__":
    main()
