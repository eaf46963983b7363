"""Paged GQA decode written from its definition (include/kindex/kindex.h, FlashInfer 0.7's semantics), in float64
by default, on any device: the one reference of the GPU tests (test_gpu.py) and of the decode loop's reference
backend (benchmarks/gpu/decode_loop.py). Slow and plain on purpose: a request at a time, every key gathered.

Definition, per request b with kv_len keys and L = q_len_per_req query rows: row j sits at position
kv_len - L + j and sees keys max(0, pos - window_left) .. pos (all of 0 .. pos without a window). Keys and values
are k_scale * k, v_scale * v (any cache dtype). With pos_encoding_mode ROPE_LLAMA, q is rotated at its position
and every key at its own, Llama's rotary embedding on dimension pairs (i, i + D/2) with frequency
1 / (rope_scale * rope_theta^(2i/D)). Logits s = sm_scale * q.k, then cap * tanh(s / cap) with a soft-cap.
sinks[h] joins the softmax as one more logit (not soft-capped) with a zero value row (FlashInfer's AttentionSink).
lse is the base-2 log-sum-exp of the logits that enter the softmax, the sink included. A row that sees no key gives
zeros and lse = -inf, or with a sink zeros and lse = sinks[h] * log2(e).
"""

import math

import torch

LN2 = math.log(2.0)


def rope_llama(x, positions, rope_scale=1.0, rope_theta=1e4):
    """x [n, heads, D] rotated at positions [n] (Llama, non-interleaved halves), in x's dtype."""
    d = x.shape[-1]
    half = d // 2
    i = torch.arange(half, dtype=torch.float64, device=x.device)
    freq = 1.0 / (rope_scale * rope_theta ** (2.0 * i / d))
    angle = positions.to(torch.float64)[:, None] * freq[None, :]  # [n, D/2]
    cos, sin = (f(angle).to(x.dtype)[:, None, :] for f in (torch.cos, torch.sin))
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attend(q, k, v, sm_scale, *, window_left=-1, logits_soft_cap=0.0, sinks=None, pos_encoding_mode="NONE",
           rope_scale=1.0, rope_theta=1e4):
    """One request on dense tensors, in q's dtype: q [L, Hq, D] (the last L positions), k, v [n, Hkv, D] (scales
    already applied). Returns (out [L, Hq, D], lse base 2 [L, Hq])."""
    rows, heads, dim = q.shape
    n, kv_heads, _ = k.shape
    group = heads // kv_heads
    q_pos = torch.arange(n - rows, n, device=q.device)
    k_pos = torch.arange(n, device=q.device)
    if pos_encoding_mode == "ROPE_LLAMA":
        q = rope_llama(q, q_pos, rope_scale, rope_theta)
        k = rope_llama(k, k_pos, rope_scale, rope_theta)
    elif pos_encoding_mode != "NONE":
        raise ValueError(f"pos_encoding_mode {pos_encoding_mode!r}")
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    logits = torch.einsum("lhd,nhd->lhn", q, k) * sm_scale
    if logits_soft_cap > 0:
        logits = logits_soft_cap * torch.tanh(logits / logits_soft_cap)
    seen = k_pos[None, :] <= q_pos[:, None]  # [L, n]
    if window_left >= 0:
        seen &= k_pos[None, :] >= q_pos[:, None] - window_left
    logits = logits.masked_fill(~seen[:, None, :], -math.inf)
    lse = torch.logsumexp(logits, dim=-1)  # natural log, -inf for a row that sees nothing
    if sinks is not None:
        lse = torch.logaddexp(lse, sinks.to(q.dtype)[None, :])
    weights = torch.exp(logits - lse[..., None]).nan_to_num(0.0)  # a row that sees nothing: all zero
    out = torch.einsum("lhn,nhd->lhd", weights, v)
    return out, lse / LN2


def gather_request(cache, page_ids, kv_len, kv_layout="NHD"):
    """[kv_len, Hkv, D]: a request's keys (or values) from its pages, in order."""
    pages = cache[page_ids]
    if kv_layout == "HND":
        pages = pages.transpose(1, 2)
    return pages.reshape(-1, *pages.shape[2:])[:kv_len]


def reference_decode(q, k_cache, v_cache, indptr, indices, last, sm_scale, *, kv_layout="NHD", k_scale=1.0,
                     v_scale=1.0, q_len_per_req=1, window_left=-1, logits_soft_cap=0.0, sinks=None,
                     pos_encoding_mode="NONE", rope_scale=1.0, rope_theta=1e4, dtype=torch.float64):
    """(out [B*L, Hq, D], lse [B*L, Hq] base 2) in `dtype`; indptr, indices, last: host lists (last None: every
    last page full)."""
    rows, heads, dim = q.shape
    page_size = k_cache.shape[1] if kv_layout == "NHD" else k_cache.shape[2]
    batch = len(indptr) - 1
    out = torch.zeros(rows, heads, dim, dtype=dtype, device=q.device)
    lse = torch.full((rows, heads), -math.inf, dtype=dtype, device=q.device)
    for b in range(batch):
        ids = indices[indptr[b]:indptr[b + 1]]  # an empty request still has its rows (a sink gives them an lse)
        kv_len = (len(ids) - 1) * page_size + (last[b] if last is not None else page_size) if ids else 0
        ids_t = torch.tensor(ids, dtype=torch.long, device=q.device)
        k = gather_request(k_cache, ids_t, kv_len, kv_layout).to(dtype) * k_scale
        v = gather_request(v_cache, ids_t, kv_len, kv_layout).to(dtype) * v_scale
        span = slice(b * q_len_per_req, (b + 1) * q_len_per_req)
        out[span], lse[span] = attend(q[span].to(dtype), k, v, sm_scale, window_left=window_left,
                                      logits_soft_cap=logits_soft_cap, sinks=sinks,
                                      pos_encoding_mode=pos_encoding_mode, rope_scale=rope_scale,
                                      rope_theta=rope_theta)
    return out, lse
