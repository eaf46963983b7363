#!/usr/bin/env python3
"""Writes kindex's decode-variant dataset: FlashInfer-Bench definitions and workloads of the paged GQA decode with
FlashInfer's variants (fp8 KV cache with k_scale / v_scale, logits soft-cap, sliding window, attention sinks, HND
layout, several query tokens per request, Llama RoPE), one definition per variant at a public model's shape.

Run from anywhere: python3 definitions/decode_variants/generate.py [--out DIR]   (stdlib only; rewrites
definitions/, workloads/, blob/ and README.md beside this file, or under DIR; the output depends on nothing but this
script and generate_workloads.py's uuid rule).

Each definition's `reference` is plain PyTorch in the form of FlashInfer-Bench's gqa_paged_decode reference (gather a
request's pages, bmm, logsumexp / softmax in float32), extended by the variants; the inputs it lacks are set to
FlashInfer's defaults at its top, so every definition's code reads the same. kindex's CPU reference
(src/reference/paged_decode.cpp) computes the same in float64; tests/runner/test_decode_variants.cpp checks the two
agree on every definition's adversarial workload.
"""
import json
import math
import pathlib
import struct
import sys

HERE = pathlib.Path(__file__).resolve().parent

# The bundled workloads' uuid rule (definitions/generate_workloads.py; src/catalog/builtin.cpp agrees, tested).
sys.path.insert(0, str(HERE.parent))
from generate_workloads import mix64, stable_uuid  # noqa: E402

# One definition per variant: (model, its config.json, H, K, D, page size, variant, its scalar inputs' values, the
# variant's note). variant keys: kv ("e4m3" / "e5m2"), hnd, q_len, softcap, swa, sink, rope (catalog::DecodeParams).
VARIANTS = [
    dict(model="Gemma-2-9B", repo="google/gemma-2-9b", h=16, k=8, d=256, ps=16, softcap=True, swa=True,
         what="logits soft-cap and sliding window",
         scalars={"sm_scale": 256 ** -0.5, "logits_soft_cap": 50.0, "window_left": 4095},
         note="attn_logit_softcapping 50 and its sliding-window layers (sliding_window 4096: a token sees itself and "
              "the 4095 before it, window_left 4095); sm_scale query_pre_attn_scalar^-1/2 = 1/16"),
    dict(model="gpt-oss-120b", repo="openai/gpt-oss-120b", h=64, k=8, d=64, ps=16, swa=True, sink=True,
         what="sliding window and attention sinks",
         scalars={"sm_scale": 64 ** -0.5, "window_left": 127},
         note="its sliding-window layers (sliding_window 128: window_left 127) with a learned sink per head "
              "(gpt-oss-20b has the same attention shape)"),
    dict(model="Llama-3.1-8B", repo="meta-llama/Llama-3.1-8B", h=32, k=8, d=128, ps=16, kv="e4m3",
         what="fp8 e4m3 KV cache, k_scale / v_scale",
         scalars={"sm_scale": 128 ** -0.5, "k_scale": 0.8125, "v_scale": 1.375},
         note="an fp8 e4m3 KV cache with per-tensor dequantization scales k_scale and v_scale"),
    dict(model="Llama-3.1-70B", repo="meta-llama/Llama-3.1-70B", h=8, k=1, d=128, ps=64, kv="e5m2",
         what="fp8 e5m2 KV cache, k_scale / v_scale (TP 8)",
         scalars={"sm_scale": 128 ** -0.5, "k_scale": 1.125, "v_scale": 0.625},
         note="at TP 8, an fp8 e5m2 KV cache with per-tensor dequantization scales"),
    dict(model="Llama-3.1-8B", repo="meta-llama/Llama-3.1-8B", h=32, k=8, d=128, ps=16, q_len=4,
         what="4 query tokens per request (speculative verify)",
         scalars={"sm_scale": 128 ** -0.5},
         note="speculative decoding's verify step: 3 draft tokens and the last accepted one, 4 query tokens per "
              "request, causal among them"),
    dict(model="Qwen2.5-7B", repo="Qwen/Qwen2.5-7B", h=28, k=4, d=128, ps=16, hnd=True,
         what="HND cache layout",
         scalars={"sm_scale": 128 ** -0.5},
         note="the HND cache layout [num_pages, num_kv_heads, page_size, head_dim] (group size 7)"),
    dict(model="Meta-Llama-3-8B", repo="meta-llama/Meta-Llama-3-8B", h=32, k=8, d=128, ps=16, rope=True,
         what="RoPE (Llama) in the kernel",
         scalars={"sm_scale": 128 ** -0.5, "rope_scale": 1.0, "rope_theta": 500000.0},
         note="RoPE applied in the kernel (FlashInfer's pos_encoding_mode ROPE_LLAMA) at rope_theta 500000"),
]

KV_DTYPES = {None: "bfloat16", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def name_of(v):
    """catalog::DecodeParams::name(): the plain name, then the suffixes in their fixed order."""
    n = f"gqa_paged_decode_h{v['h']}_kv{v['k']}_d{v['d']}_ps{v['ps']}"
    if v.get("kv"):
        n += "_" + v["kv"]
    if v.get("hnd"):
        n += "_hnd"
    if v.get("q_len", 1) > 1:
        n += f"_q{v['q_len']}"
    for key, suffix in (("softcap", "_softcap"), ("swa", "_swa"), ("sink", "_sink"), ("rope", "_rope")):
        if v.get(key):
            n += suffix
    return n


def variant_inputs(v):
    """The inputs after sm_scale, in the suffixes' order, named as FlashInfer's wrappers name them."""
    scalar = lambda dtype, description: {"shape": None, "dtype": dtype, "description": description}  # noqa: E731
    out = {}
    if v.get("kv"):
        out["k_scale"] = scalar("float32", "Dequantization scale of k_cache: k = k_scale * k_cache.")
        out["v_scale"] = scalar("float32", "Dequantization scale of v_cache: v = v_scale * v_cache.")
    if v.get("softcap"):
        out["logits_soft_cap"] = scalar("float32", "Logits soft-cap: a logit s becomes cap * tanh(s / cap).")
    if v.get("swa"):
        out["window_left"] = scalar("int32", "Sliding window: a query at position i sees keys i - window_left .. i.")
    if v.get("sink"):
        out["sinks"] = {"shape": ["num_qo_heads"], "dtype": "float32",
                        "description": "Attention sink of each query head: one more logit with a zero value row."}
    if v.get("rope"):
        out["rope_scale"] = scalar("float32", "RoPE position scale (Llama): angle = position / rope_scale * freq.")
        out["rope_theta"] = scalar("float32", "RoPE base (Llama): freq_i = rope_theta^(-2i / head_dim).")
    return out


REFERENCE = '''import math

import torch


@torch.no_grad()
def run({args}):
    num_q_rows, num_qo_heads, head_dim = q.shape
    {cache_shape} = k_cache.shape
    batch_size = kv_indptr.shape[0] - 1
    q_len_per_req = num_q_rows // batch_size

    # Check constants
    assert num_qo_heads == {h}
    assert num_kv_heads == {k}
    assert head_dim == {d}
    assert page_size == {ps}
    assert q_len_per_req == {q_len}

    # The variants this definition does not take, at FlashInfer's defaults.
{defaults}
    device = q.device
    output = torch.zeros(
        (num_q_rows, num_qo_heads, head_dim), dtype=torch.bfloat16, device=device
    )
    lse = torch.full(
        (num_q_rows, num_qo_heads), -float("inf"), dtype=torch.float32, device=device
    )

    gqa_ratio = num_qo_heads // num_kv_heads
    # Keys and values as attention reads them, k_scale * k and v_scale * v in float32,
    # [num_pages, page_size, num_kv_heads, head_dim]
    k_pages = k_cache.to(torch.float32){to_nhd} * k_scale
    v_pages = v_cache.to(torch.float32){to_nhd} * v_scale
    q_f32 = q.to(torch.float32)

    for b in range(batch_size):
        ps = int(kv_indptr[b].item())
        pe = int(kv_indptr[b + 1].item())
        rows = slice(b * q_len_per_req, (b + 1) * q_len_per_req)
        if ps >= pe:
            continue  # no keys: zeros, lse -inf

        page_ids = kv_indices[ps:pe].to(torch.long)
        last_len = {last_len}
        kv_len = (len(page_ids) - 1) * page_size + last_len
        # Gather tokens: the pages flat, the last one cut to last_len
        k_tokens = k_pages[page_ids].reshape(-1, num_kv_heads, head_dim)[:kv_len]
        v_tokens = v_pages[page_ids].reshape(-1, num_kv_heads, head_dim)[:kv_len]

        # Query token j of the request sits at position kv_len - q_len_per_req + j, key t at t
        q_pos = torch.arange(kv_len - q_len_per_req, kv_len, device=device)
        k_pos = torch.arange(kv_len, device=device)
        q_b = q_f32[rows]  # [q_len_per_req, num_qo_heads, head_dim]
        if rope_theta is not None:
            q_b = rope_llama(q_b, q_pos, rope_scale, rope_theta)
            k_tokens = rope_llama(k_tokens, k_pos, rope_scale, rope_theta)

        # [num_kv_heads, T, D] -> expand to [num_qo_heads, T, D]
        k = k_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)
        v = v_tokens.permute(1, 0, 2).repeat_interleave(gqa_ratio, dim=0)

        logits = torch.bmm(q_b.permute(1, 0, 2), k.transpose(1, 2)) * sm_scale  # [H, L, T]
        if logits_soft_cap > 0:
            logits = logits_soft_cap * torch.tanh(logits / logits_soft_cap)
        # Causal among the request's tokens; a window: position i sees keys i - window_left .. i
        visible = k_pos[None, :] <= q_pos[:, None]
        if window_left >= 0:
            visible = visible & (k_pos[None, :] >= q_pos[:, None] - window_left)
        logits = logits.masked_fill(~visible[None], -float("inf"))
        if sinks is not None:
            # The sink: one more logit of its head (not soft-capped) whose value row is zero
            sink = sinks.to(torch.float32)[:, None, None].expand(num_qo_heads, q_len_per_req, 1)
            logits = torch.cat([logits, sink], dim=-1)
            zero_row = torch.zeros((num_qo_heads, 1, head_dim), dtype=torch.float32, device=device)
            v = torch.cat([v, zero_row], dim=1)

        lse[rows] = (torch.logsumexp(logits, dim=-1) / math.log(2.0)).transpose(0, 1)
        attn = torch.softmax(logits, dim=-1)
        output[rows] = torch.bmm(attn, v).transpose(0, 1).to(torch.bfloat16)

    return output, lse
'''

ROPE_HELPER = '''

def rope_llama(x, positions, rope_scale, rope_theta):
    """Llama's rotary embedding of x [n, heads, head_dim] at positions [n]: the pair (i, i + head_dim / 2)
    turned by the angle position / rope_scale * rope_theta^(-2i / head_dim)."""
    half = x.shape[-1] // 2
    exponent = torch.arange(half, dtype=torch.float64, device=x.device) * 2.0 / x.shape[-1]
    freq = 1.0 / (rope_scale * rope_theta ** exponent)
    angle = positions.to(torch.float64)[:, None] * freq[None, :]
    cos = torch.cos(angle).to(torch.float32)[:, None, :]
    sin = torch.sin(angle).to(torch.float32)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
'''


def reference(v, input_names):
    defaults = []
    if not v.get("kv"):
        defaults.append("k_scale, v_scale = 1.0, 1.0")
    if not v.get("softcap"):
        defaults.append("logits_soft_cap = 0.0")
    if not v.get("swa"):
        defaults.append("window_left = -1")
    if not v.get("sink"):
        defaults.append("sinks = None")
    if not v.get("rope"):
        defaults.append("rope_scale, rope_theta = 1.0, None  # no RoPE")
    text = REFERENCE.format(
        args=", ".join(input_names),
        cache_shape="_, num_kv_heads, page_size, _" if v.get("hnd") else "_, page_size, num_kv_heads, _",
        h=v["h"], k=v["k"], d=v["d"], ps=v["ps"], q_len=v.get("q_len", 1),
        defaults="".join(f"    {line}\n" for line in defaults),
        to_nhd=".transpose(1, 2)" if v.get("hnd") else "",
        last_len="int(kv_last_page_len[b].item())" if v["ps"] > 1 else "1")
    if not v.get("rope"):
        return text
    return text + ROPE_HELPER


def definition(v):
    """catalog::decode_definition's signature for the variant, in the upstream files' JSON form, with the reference."""
    name, q_len, kv = name_of(v), v.get("q_len", 1), KV_DTYPES[v.get("kv")]
    rows = "total_q" if q_len > 1 else "batch_size"
    axes = {"batch_size": {"type": "var", "description": "Number of requests." if q_len > 1 else
                           "Total number of query tokens."}}
    if q_len > 1:
        axes["q_len_per_req"] = {"type": "const", "value": q_len, "description": "Query tokens per request."}
        axes["total_q"] = {"type": "expr", "expression": "batch_size * q_len_per_req",
                           "description": "Total number of query tokens."}
    axes.update({
        "num_qo_heads": {"type": "const", "value": v["h"], "description": "Number of query/output attention heads."},
        "num_kv_heads": {"type": "const", "value": v["k"], "description": "Number of key-value attention heads."},
        "head_dim": {"type": "const", "value": v["d"], "description": "Dimension of each attention head."},
        "num_pages": {"type": "var", "description": "Total number of allocated pages in the KV cache."},
        "page_size": {"type": "const", "value": v["ps"], "description": "Number of tokens stored per page."},
        "len_indptr": {"type": "var", "description": "Length of kv_indptr array."},
        "num_kv_indices": {"type": "var", "description": "Total number of KV page indices."},
    })
    cache = ["num_pages", "num_kv_heads", "page_size", "head_dim"] if v.get("hnd") else \
        ["num_pages", "page_size", "num_kv_heads", "head_dim"]
    layout = "HND" if v.get("hnd") else "NHD"
    inputs = {
        "q": {"shape": [rows, "num_qo_heads", "head_dim"], "dtype": "bfloat16",
              "description": "Query tensor for decode" + (f": {q_len} rows per request." if q_len > 1 else ".")},
        "k_cache": {"shape": cache, "dtype": kv, "description": f"Paged key cache ({layout})."},
        "v_cache": {"shape": cache, "dtype": kv, "description": f"Paged value cache ({layout})."},
        "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32", "description": "KV page offsets for each sequence."},
        "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32", "description": "Page IDs for KV cache lookups."},
    }
    if v["ps"] > 1:
        inputs["kv_last_page_len"] = {"shape": ["batch_size"], "dtype": "int32",
                                      "description": "Number of valid tokens in the last page for each sequence."}
    inputs["sm_scale"] = {"shape": None, "dtype": "float32", "description": "Softmax scale."}
    inputs.update(variant_inputs(v))
    outputs = {
        "output": {"shape": [rows, "num_qo_heads", "head_dim"], "dtype": "bfloat16",
                   "description": "Attention output tensor."},
        "lse": {"shape": [rows, "num_qo_heads"], "dtype": "float32",
                "description": "The 2-based log-sum-exp of the attention logits (soft-capped, masked, with the sink)."},
    }
    tags = ["stage:decode", "status:generated", f"model:{v['model'].lower()}"]
    tags += [f"variant:{key}" for key in ("kv", "hnd", "q_len", "softcap", "swa", "sink", "rope") if v.get(key)]
    # FlashInfer's decode wrapper takes every variant but sinks and several query tokens (README, "Choices").
    if not v.get("sink") and v.get("q_len", 1) == 1:
        tags.append("fi_api:flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper")
    doc = {
        "name": name,
        "description": (f"Batched Grouped Query Attention decode with a paged KV cache (page_size={v['ps']}), "
                        f"{v['model']}'s attention shape with {v['note']}. kindex decode-variant dataset."),
        "op_type": "gqa_paged",
        "tags": tags,
        "axes": axes,
        "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
        "inputs": inputs,
        "outputs": outputs,
        "reference": reference(v, list(inputs)),
    }
    return doc


# --- workloads ----------------------------------------------------------------------------------------------------

def safetensors_bytes(tensors, metadata):
    """The safetensors format: u64 little-endian header length, JSON header, data (int32 tensors here)."""
    header, data = {}, b""
    for key, values in tensors.items():
        blob = struct.pack(f"<{len(values)}i", *values)
        header[key] = {"dtype": "I32", "shape": [len(values)], "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def scattered_ids(n, k, key):
    """k distinct ids of range(n) in a scattered order: a Fisher-Yates shuffle drawn by splitmix64 (mix64) from the
    key, so the tables depend on nothing but this script (not on Python's random module)."""
    state = 1469598103934665603  # FNV-1a 64 of the key, as stable_uuid starts
    for byte in key.encode():
        state = ((state ^ byte) * 1099511628211) & ((1 << 64) - 1)
    ids = list(range(n))
    for i in range(n - 1, 0, -1):
        state = mix64(state)
        j = state % (i + 1)
        ids[i], ids[j] = ids[j], ids[i]
    return ids[:k]


def adversarial_table(v):
    """A hand-shaped page table (README, "Adversarial page tables"): per request its token count and pages."""
    ps, q_len = v["ps"], v.get("q_len", 1)
    # A window's definition gets a request longer than its window.
    long_tokens = max(40 * ps, v["scalars"].get("window_left", 0) + 3 * ps) + 7
    tokens = [max(1, q_len), 2 * ps + ps // 2 + 1, 4 * ps, ps + 1, long_tokens, ps]
    pages_per = [-(-t // ps) for t in tokens]
    distinct = 2 + sum(pages_per)  # more than needed: some ids stay unused
    num_pages = distinct + 16
    pool = scattered_ids(num_pages, distinct, name_of(v))
    shared = pool.pop()
    table = []
    for r, n in enumerate(pages_per):
        if r == 0 or r == 5:
            pages = [shared] if r == 0 else [pool.pop()]  # request 0 reads the shared page's first tokens
        elif r == 2:
            a, b = pool.pop(), pool.pop()
            pages = [shared, a, b, a]  # the same page twice in one request
        else:
            pages = [shared] + [pool.pop() for _ in range(n - 1)]  # a prefix page several requests share
        table.append(pages)
    indptr = [0]
    for pages in table:
        indptr.append(indptr[-1] + len(pages))
    indices = [p for pages in table for p in pages]
    last = [t - (len(pages) - 1) * ps for t, pages in zip(tokens, table)]
    assert all(1 <= x <= ps for x in last) and all(-(-t // ps) == len(p) for t, p in zip(tokens, table))
    return indptr, indices, last, num_pages


def workload_line(doc, uuid, axes, inputs):
    return json.dumps({"definition": doc["name"], "solution": None,
                       "workload": {"uuid": uuid, "axes": axes, "inputs": inputs}, "evaluation": None})


def scalar_inputs(v):
    return {name: {"type": "scalar", "value": value} for name, value in v["scalars"].items()}


def workloads(v, doc, blob_root):
    """The adversarial case (its page table a file under blob/), then two of kindex's generated tables."""
    name, ps = doc["name"], v["ps"]
    random_inputs = {n: {"type": "random"} for n in doc["inputs"] if doc["inputs"][n]["shape"] is not None}
    lines = []
    indptr, indices, last, num_pages = adversarial_table(v)
    batch = len(indptr) - 1
    uuid = stable_uuid(f"{name}/adversarial/b{batch}/p{num_pages}/i{len(indices)}")
    path = f"blob/page_tables/{name}/{uuid}.safetensors"
    tables = {"kv_indptr": indptr, "kv_indices": indices}
    if ps > 1:
        tables["kv_last_page_len"] = last
    (blob_root / path).parent.mkdir(parents=True, exist_ok=True)
    (blob_root / path).write_bytes(safetensors_bytes(tables, {"definition": name, "uuid": uuid,
                                                              "generator": "definitions/decode_variants/generate.py"}))
    inputs = dict(random_inputs)
    for key in tables:
        inputs[key] = {"type": "safetensors", "path": path, "tensor_key": key}
    inputs.update(scalar_inputs(v))
    axes = {"batch_size": batch, "num_pages": num_pages, "len_indptr": batch + 1, "num_kv_indices": len(indices)}
    lines.append(workload_line(doc, uuid, axes, inputs))
    # Generated tables: batch x mean context, `lengths` kindex's page-table extension (model_suite README).
    context = 8192 if v.get("swa") and v["scalars"]["window_left"] >= 4096 - 1 else 4096
    for batch, mean_context, lengths in ((4, context, "equal"), (32, context // 2, "long_tail")):
        indices_n = batch * mean_context // ps
        num_pages = math.ceil(1.25 * indices_n) + 64
        inputs = dict(random_inputs)
        inputs["kv_indptr"] = {"type": "random", "lengths": lengths}
        inputs.update(scalar_inputs(v))
        uuid = stable_uuid(f"{name}/b{batch}/p{num_pages}/i{indices_n}/{lengths}")
        axes = {"batch_size": batch, "num_pages": num_pages, "len_indptr": batch + 1, "num_kv_indices": indices_n}
        lines.append(workload_line(doc, uuid, axes, inputs))
    return lines


# --- README -------------------------------------------------------------------------------------------------------

README_HEAD = """# Decode variants

Written by `generate.py` (do not edit: change the script and run `python3 definitions/decode_variants/generate.py`).

A FlashInfer-Bench dataset of the paged GQA decode with FlashInfer's variants, one definition per variant at a public
model's attention shape: {count} definitions, {workload_count} workloads. kindex's kernel runs all of them
(`kindex_paged_decode` with kindex.h's version-2 fields); it is read from disk, not bundled:

```
build/bin/kindex catalog check definitions/decode_variants
build/bin/kindex bench --problem definitions/decode_variants --impl kindex                      # on a GPU
build/bin/kindex bench --problem definitions/decode_variants --workloads small --impl cpu-reference
```

## Definitions

| definition | model | variant | workloads' variant inputs |
| --- | --- | --- | --- |
{rows}

Numbers from each model's `config.json` on huggingface.co ({repos}).

## Format

- Names: `gqa_paged_decode_h{{H}}_kv{{K}}_d{{D}}_ps{{P}}` as FlashInfer-Bench's, then one suffix per variant in this
  order: `_e4m3` / `_e5m2` (fp8 caches), `_hnd`, `_q{{N}}`, `_softcap`, `_swa`, `_sink`, `_rope`
  (`catalog::DecodeParams`, `src/catalog/builtin.hpp`).
- Inputs: FlashInfer-Bench's `gqa_paged_decode` inputs (q, k_cache, v_cache, kv_indptr, kv_indices,
  kv_last_page_len, sm_scale), then the variant's, named as FlashInfer's wrappers name them and in this order:
  `k_scale`, `v_scale` (float32 scalars; k_cache and v_cache `float8_e4m3fn` / `float8_e5m2`), `logits_soft_cap`
  (float32), `window_left` (int32 scalar), `sinks` (float32 `[num_qo_heads]`), `rope_scale`, `rope_theta`
  (float32). The caller's `pos_encoding_mode="ROPE_LLAMA"` is implied by the RoPE inputs, `kv_layout="HND"` by the
  caches' shape `[num_pages, num_kv_heads, page_size, head_dim]`.
- Several query tokens per request (`_q{{N}}`): const axis `q_len_per_req`, expr axis `total_q = batch_size *
  q_len_per_req`; q, output and lse have `total_q` rows, request b's rows `b * N .. b * N + N - 1`. `batch_size`
  counts requests (kv_indptr has `batch_size + 1` entries).
- Semantics (kindex.h, FlashInfer's): k = k_scale * k_cache, v = v_scale * v_cache; a logit s = sm_scale * q.k
  becomes `cap * tanh(s / cap)` with a soft-cap; query token j of a request with kv_len keys sits at position
  kv_len - N + j and sees keys up to its position (causal among the request's tokens), and with a window only keys
  from position - window_left; a sink joins each row's softmax as one more logit (not soft-capped) with a zero value
  row; RoPE (Llama, rotate-half) turns q at its position and every key at its own by position / rope_scale *
  rope_theta^(-2i / head_dim) before the dot product. lse is base 2, of the logits that enter the softmax (after
  soft-cap and masking, the sink included).
- `reference`: FlashInfer-Bench's gqa_paged_decode reference extended, in float32; the variants a definition lacks
  are set to FlashInfer's defaults at its top, so all read alike. kindex's truth is its CPU reference
  (`src/reference`, float64, the output rounded once); on a GPU `kindex bench` checks kindex against it (the GPU
  reference computes the plain decode only) and reports no speedup for these definitions (no GPU timing reference).

## Workloads

Three per definition, every float input `random` (fp8 caches: normal values cast to fp8, as torch's `randn(...).to()`),
the scalars the model's:

- adversarial: a page table from `blob/page_tables/<definition>/<uuid>.safetensors` (int32 kv_indptr, kv_indices,
  kv_last_page_len), six requests: one of a single token ({q_len_note}) on a page the others share, one with a
  partial last page, one reading the same page twice (non-adjacent), one whose last page holds 1 token, a long one
  (longer than the window where the definition has one) and one of exactly one full page of its own; all but the
  last begin with the shared page; ids scattered, in no order, over a cache with unused pages.
- `equal` and `long_tail` (kindex's page-table generator, `lengths` its extension on kv_indptr: model_suite README):
  batch 4 at the mean context below and batch 32 at half of it; num_pages = ceil(1.25 x num_kv_indices) + 64.
  Mean context 8192 for a window of 4095 (so the window cuts), else 4096.

With random inputs (q and k standard normal) the logits sit near N(0, 1): a soft-cap of 50 bends them by about 1e-3
and a window one key off moves the long request's lse by 3e-4, both far inside FlashInfer-Bench's tolerance
(atol = rtol = 1e-2). The harness then cannot tell such a kernel bug; kindex's test of these references holds them to
one rounding of each other (tests/runner/test_decode_variants.cpp), where both show.

A request must hold at least `q_len_per_req` tokens (the new tokens are in the cache); kindex.h gives a row that
sees no key zeros and lse -inf, FlashInfer leaves it undefined, and the reference would write NaN: `kindex catalog
check` refuses such a table, and kindex's generator lengthens a short last page to hold them.

## Choices

- One definition per variant, at one model's shape, rather than every combination: kindex's kernel takes any
  combination (its GPU tests run them), and a definition for one is the same few lines of the generator.
- The `fi_api` tag names FlashInfer's decode wrapper where it takes the variant (fp8 caches, soft-cap, window, HND,
  RoPE); FlashInfer serves sinks and several query tokens per request through other entry points (its attention-sink
  wrapper, its TRT-LLM decode), so those two definitions carry none, and kindex's FlashInfer peers refuse every
  variant for now (they call the plain decode wrapper).
- fp8 caches come with `k_scale` / `v_scale` inputs (FlashInfer's `run(..., k_scale=, v_scale=)`), the bf16 ones
  without (their default 1).
- A model's sliding window W is `window_left = W - 1`: the token itself and the W - 1 before it, as vLLM and SGLang
  pass it to FlashInfer.
"""


def readme(rows_data, workload_count):
    rows = []
    repos = []
    for v, doc in rows_data:
        values = [f"{k} {val:g}" if isinstance(val, float) else f"{k} {val}"
                  for k, val in v["scalars"].items() if k != "sm_scale"]
        values += ["sinks random"] if v.get("sink") else []
        rows.append(f"| `{doc['name']}` | {v['model']} | {v['what']} | {', '.join(values) or '-'} |")
        url = f"https://huggingface.co/{v['repo']}/blob/main/config.json"
        if url not in repos:
            repos.append(url)
    text = README_HEAD.format(count=len(rows_data), workload_count=workload_count, rows="\n".join(rows),
                              repos=", ".join(repos), q_len_note="q_len_per_req tokens with several query tokens")
    return text


def main():
    # --out DIR writes the dataset there instead (the test that the committed files are the script's output).
    root = pathlib.Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else HERE
    defs, wls, blob = root / "definitions" / "gqa_paged", root / "workloads" / "gqa_paged", root / "blob"
    for folder in (defs, wls):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
    for old in sorted(blob.rglob("*"), reverse=True) if blob.exists() else []:
        old.unlink() if old.is_file() else old.rmdir()
    done, count = [], 0
    for v in VARIANTS:
        doc = definition(v)
        (defs / f"{doc['name']}.json").write_text(json.dumps(doc, indent=2) + "\n")
        lines = workloads(v, doc, root)
        (wls / f"{doc['name']}.jsonl").write_text("\n".join(lines) + "\n")
        done.append((v, doc))
        count += len(lines)
    (root / "README.md").write_text(readme(done, count))
    print(f"{len(done)} definitions, {count} workloads")


if __name__ == "__main__":
    main()
