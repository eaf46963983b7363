#!/usr/bin/env python3
"""PyTorch baselines for the 68 decode seed workloads, on the same page tables bench_decode used.

  (a) gathered-KV SDPA: K/V rows gathered into a padded [B, Hkv, Tmax, D] batch (the token -> row map is built
      outside the timed call, like a plan), then one torch.nn.functional.scaled_dot_product_attention call with a
      key-padding mask and enable_gqa=True (output only; SDPA returns no lse);
  (b) the definition's reference: the per-sequence fp32 loop of the FlashInfer-Bench definition (ps1 and ps64).
Timing as bench_decode: cold L2 (2 x L2-size buffer zeroed before each call), CUDA events around each call,
median. SDPA: 10 warm-up, 50 timed; the reference loop (tens of ms a call): 3 warm-up, 20 timed.

  python3 bench/torch_decode_baselines.py --kindex bench.json --tables DIR --out baselines.json \
      [--combined combined.json]
The combined file is bench_decode's JSON with each workload's baseline times and speedup factors added.
"""
import argparse
import json
import math
import re
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F


def reference_ps1(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    # gqa_paged_decode_h32_kv4_d128_ps1 reference (FlashInfer-Bench definition), without its asserts.
    batch_size, num_qo_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = k_cache.shape
    device = q.device
    output = torch.zeros((batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((batch_size, num_qo_heads), -float("inf"), dtype=torch.float32, device=device)
    gqa_ratio = num_qo_heads // num_kv_heads
    k_flat = k_cache.squeeze(1).to(torch.float32)
    v_flat = v_cache.squeeze(1).to(torch.float32)
    q_f32 = q.to(torch.float32)
    for b in range(batch_size):
        ps = int(kv_indptr[b].item())
        pe = int(kv_indptr[b + 1].item())
        if ps >= pe:
            output[b].zero_()
            continue
        idx = kv_indices[ps:pe].to(torch.long)
        k = k_flat[idx].permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v = v_flat[idx].permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        q_b = q_f32[b].unsqueeze(1)
        logits = torch.bmm(q_b, k.transpose(1, 2)).squeeze(1) * sm_scale
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        attn = torch.softmax(logits, dim=-1)
        output[b] = torch.bmm(attn.unsqueeze(1), v).squeeze(1).to(torch.bfloat16)
    return output, lse


def reference_paged(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    # gqa_paged_decode_h24_kv4_d128_ps64 reference (FlashInfer-Bench definition), without its asserts.
    batch_size, num_qo_heads, head_dim = q.shape
    _, page_size, num_kv_heads, _ = k_cache.shape
    device = q.device
    output = torch.zeros((batch_size, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((batch_size, num_qo_heads), -float("inf"), dtype=torch.float32, device=device)
    gqa_ratio = num_qo_heads // num_kv_heads
    k_cache_f32 = k_cache.to(torch.float32)
    v_cache_f32 = v_cache.to(torch.float32)
    q_f32 = q.to(torch.float32)
    for b in range(batch_size):
        ps_idx = int(kv_indptr[b].item())
        pe_idx = int(kv_indptr[b + 1].item())
        last_len = int(kv_last_page_len[b].item())
        if ps_idx >= pe_idx:
            output[b].zero_()
            continue
        page_ids = kv_indices[ps_idx:pe_idx].to(torch.long)
        num_full_pages = len(page_ids) - 1
        if num_full_pages > 0:
            k_full = k_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
            v_full = v_cache_f32[page_ids[:num_full_pages]].reshape(-1, num_kv_heads, head_dim)
        else:
            k_full = torch.empty(0, num_kv_heads, head_dim, device=device)
            v_full = torch.empty(0, num_kv_heads, head_dim, device=device)
        k_tokens = torch.cat([k_full, k_cache_f32[page_ids[-1], :last_len]], dim=0)
        v_tokens = torch.cat([v_full, v_cache_f32[page_ids[-1], :last_len]], dim=0)
        k = k_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v = v_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        q_b = q_f32[b].unsqueeze(1)
        logits = torch.bmm(q_b, k.transpose(1, 2)).squeeze(1) * sm_scale
        lse[b] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        attn = torch.softmax(logits, dim=-1)
        output[b] = torch.bmm(attn.unsqueeze(1), v).squeeze(1).to(torch.bfloat16)
    return output, lse


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

        if ps == 1:
            ref = lambda: reference_ps1(q, k_cache, v_cache, indptr, indices, sm_scale)
        else:
            ref = lambda: reference_paged(q, k_cache, v_cache, indptr, indices, last, sm_scale)

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
