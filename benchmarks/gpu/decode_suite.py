#!/usr/bin/env python3
"""Paged GQA decode implementations measured on FlashInfer-Bench-style datasets, in one process, on identical inputs.

Input: one or more dataset folders as `kindex catalog export --out DIR` writes them (FlashInfer-Bench layout):
DIR/definitions/gqa_paged/<name>.json (const axes num_qo_heads, num_kv_heads, head_dim, page_size) and
DIR/workloads/gqa_paged/<name>.jsonl (one workload a line: axes batch_size, num_pages, num_kv_indices; q / k_cache /
v_cache "random"; sm_scale a scalar; kv_indptr, kv_indices (, kv_last_page_len) {"type": "safetensors", "path":
"blob/....safetensors", "tensor_key": NAME}, the path relative to DIR). Every case is labelled "<definition>#<index>"
(the workload's line in its file). Safetensors files are read with the `safetensors` package where it imports, else
with the small reader here (8-byte little-endian header length, JSON header, raw data).

Implementations (each optional: one that does not import is recorded as "not installed: <reason>" and the rest run):
  kindex           libkindex.so through its C ABI (ctypes; include/kindex/kindex.h, mirrored in python/kindex/_capi.py).
                   Where the library exports kindex_paged_decode_plan and kindex_paged_decode_run, `kindex` times the
                   run alone after one plan (what each layer of a model sees), the column `kindex_plan` the plan call
                   alone, and the kindex entry's `plan_plus_run` both in a row; otherwise `kindex` is the one call
                   kindex_paged_decode. The workspace is sized (kindex_paged_decode_workspace_size) outside timing.
  flashinfer_tc    FlashInfer BatchDecodeWithPagedKVCacheWrapper(128 MB workspace, "NHD", use_tensor_cores=True /
  flashinfer_cuda    False, backend="fa2"); plan() once per case outside timing (its host time recorded), run(q, (k, v),
                   return_lse=True) timed; lse base 2. The CUDA-core kernel takes group sizes 1, 2, 3, 4, 6, 8, 16
                   (0.7.2's DISPATCH_GQA_GROUP_SIZE): on others the error it gives is recorded as "unsupported".
  flashinfer_xqa   flashinfer.decode.trtllm_batch_decode_with_kv_cache(..., kv_layout="NHD", backend="xqa"): sm_90 /
                   sm_100 / sm_120, page sizes 16, 32, 64, 128, no lse (output checked only). Needs a FlashInfer
                   that keeps XQA (flashinfer/jit/xqa.py and its CUDA sources).
  fa3              FlashAttention-3 flash_attn_interface.flash_attn_with_kvcache(q [B, 1, H, D], k_cache, v_cache,
                   cache_seqlens int32 [B], page_table int32 [B, max_pages] (built from indptr/indices, padded with
                   page 0, outside timing), causal=True, num_splits=0, scheduler_metadata=get_scheduler_metadata(...)
                   computed once outside timing, return_softmax_lse=True); lse natural log, compared as lse / ln 2.
                   FA3 takes any page size (page_size % its kBlockN == 0 uses TMA loads, others its cp.async
                   gather); the sm_90a bf16 build has head_dim 64, 128, 256.
  tileops          tileops.attention.GQAPagedFwdOp(is_causal=True, sm_scale=...).forward(q, k_cache, v_cache,
                   block_table, cache_seqlens, cu_seqlens_q = arange(B + 1)); no lse. Its tvm-ffi conflicts with
                   FlashInfer's: run it alone (`--impls tileops --out tileops.json`) in its own process; the inputs
                   are the same (drawn from a generator seeded by --seed and the case label) and `--report a.json
                   b.json` merges the files by case.

Every case: q, k_cache, v_cache drawn as bf16 randn on the GPU (torch.Generator seeded per case); an fp32 reference
computed on the GPU, sequences sorted by length and taken in groups, tokens in chunks with an online softmax, so
batch 256 x 128k-token contexts fit (reference_decode: device-agnostic); each implementation run once, its outputs
poisoned with NaN, run again and compared with the reference by the FlashInfer-Bench rule (an element fails if
|x-y| > 1e-2 AND |x-y|/(|y|+1e-8) > 1e-2; any non-finite value fails; every element must pass; output and, where
the implementation returns it, lse); then timed with benchmarks/gpu/devbench.py's DeviceTimer: cold L2 (a 2 x L2
buffer zeroed before each call), a GPU spin ahead of each call so the host's launch is outside the span
(launch_covered says whether it was long enough), 10 warm-up + 50 timed calls (--quick: 3 + 10), median.
Floor: bytes (every distinct referenced KV row once, K and V, + q + output + lse) / the device-to-device copy rate
measured in the same run. Ratios: ratio_kindex_vs_<peer> = kindex / peer (< 1: kindex faster), only where the peer
passed the comparator; ratio_kindex_vs_best against the fastest correct peer. A case whose KV cache and reference
working set would not fit in free GPU memory is skipped and recorded.

  python3 benchmarks/gpu/decode_suite.py --lib build/lib/libkindex.so --dataset DIR [--dataset DIR2] \\
      --out results.json [--resume] [--filter REGEX] [--impls kindex,fa3,...] [--quick] [--prebuild] [--max-cases N]
  python3 benchmarks/gpu/decode_suite.py --impls tileops --dataset DIR --out tileops.json      # its own process
  python3 benchmarks/gpu/decode_suite.py --report results.json [tileops.json ...]             # markdown + summary
Decode variants (kindex.h version 2, FlashInfer's semantics), for kindex and FlashInfer's fa2 wrappers only:
--kv-dtype fp8_e4m3|fp8_e5m2 (the drawn bf16 caches converted), --layout HND, --q-len N (q has batch x N rows,
causal among them; FlashInfer: tensor cores only), --window N (window_left), --soft-cap X, --sinks (drawn per case),
--rope (ROPE_LLAMA; --rope-scale / --rope-theta, default 1 and 1e4, go to both libraries), --k-scale / --v-scale.
With --sinks, flashinfer_tc is FlashInfer's AttentionSink variant on its fa2 batch-prefill kernel
(BatchPrefillWithPagedKVCacheWrapper with jit_args, as upstream's BatchAttentionWithAttentionSinkWrapper builds it)
and flashinfer_cuda is "unsupported": the decode wrapper's run(sinks=...) drops the sinks on the fa2 backend
(FLASHINFER_SINKS below says where). A non-default variant is
checked against python/tests/decode_reference.py (float32, a request at a time) instead of the chunked reference,
and recorded in each row ("variant"); the default keeps the suite as it was. --fp8-vs-bf16 runs every case
twice, KV in bf16 then in fp8 e4m3 (the same drawn values, converted), and adds "fp8_vs_bf16" to the JSON: per case
and implementation the bf16 / fp8 median ratio, and the goal "fp8 >= 1.7x faster than bf16 on every case whose bf16
KV bytes are >= 64 MB" for kindex (met, or the cases that miss it).

The JSON is rewritten after every case. Exit status: 0; 1 on any error (a dataset problem, an implementation's
unexpected exception, a kindex status, a broken CUDA context); 3 when everything ran but some implementation failed
the comparator. benchmarks/gpu/run_decode_suite_device.sh is the device call.
"""
import argparse
import gc
import json
import math
import pathlib
import re
import struct
import sys
import time
import traceback
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import devbench as db  # noqa: E402

PEERS = ("flashinfer_tc", "flashinfer_cuda", "flashinfer_xqa", "fa3", "tileops")
IMPLEMENTATIONS = ("kindex",) + PEERS
DEFAULT_IMPLS = tuple(n for n in IMPLEMENTATIONS if n != "tileops")  # TileOPs: its own process
COLUMNS = ("kindex", "kindex_plan") + PEERS  # timed entries of a case, in table order
FLASHINFER_FA2 = {"flashinfer_tc": True, "flashinfer_cuda": False}  # name -> use_tensor_cores
# DISPATCH_GQA_GROUP_SIZE in FlashInfer 0.7.2's include/flashinfer/utils.cuh (the CUDA-core decode's group sizes)
FLASHINFER_CUDA_GROUPS = (1, 2, 3, 4, 6, 8, 16)
FIB_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2, "required_ratio": 1.0}
OP_TYPE = "gqa_paged"
CONST_AXES = ("num_qo_heads", "num_kv_heads", "head_dim", "page_size")
TABLE_INPUTS = ("kv_indptr", "kv_indices", "kv_last_page_len")
LN2 = math.log(2.0)
SCHEMA = 1
FLASHINFER_WORKSPACE_BYTES = 128 << 20
FP8_GOAL = {"min_kv_bytes": 64 << 20, "speedup": 1.7}  # issue #27: fp8 KV >= 1.7x faster than bf16 from 64 MB up
KV_DTYPES = {"bf16": "bfloat16", "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}
VARIANT_PEERS = ("flashinfer_tc", "flashinfer_cuda")  # the peers that take the variant's arguments
DEVICE = "cuda"  # where cases run (the CPU tests point it at "cpu" to drive run_case with stand-in implementations)

# FLASHINFER_SINKS: FlashInfer 0.7.2 and attention sinks (--sinks). kindex's sinks (include/kindex/kindex.h,
# python/tests/decode_reference.py) are gpt-oss's: sinks[h] is one more logit in the softmax of every row of query
# head h, in natural-log units on the scale of the scaled logits sm_scale * q.k, with a zero value row; lse includes
# it. What FlashInfer 0.7.2.post1 (the carried slim wheel, whose Python is the PyPI release's) does with sinks:
# - BatchDecodeWithPagedKVCacheWrapper.run(..., sinks=S) takes S and documents it as "appended to each row of the
#   softmax denominator", but hands it only to the trtllm-gen, cute-dsl and cudnn backends. On backend="fa2" (both
#   flashinfer_tc and flashinfer_cuda) it is dropped without an error: run()'s CUDA-core branch never puts it in the
#   kernel's arguments, and its tensor-core branch passes it to the batch-prefill module's paged_run, whose fa2
#   branch does not forward it (flashinfer/decode.py BatchDecodeWithPagedKVCacheWrapper.run; flashinfer/prefill.py
#   get_batch_prefill_module's paged_run). Until this was found the suite called run(..., sinks=S): FlashInfer then
#   computed attention without the sink, and failed the comparator on every --sinks case while kindex passed.
# - FlashInfer's fa2 sink is an attention variant instead: AttentionSink (flashinfer/jit/attention/variants.py,
#   attention_sink_fa2_decl) in a JIT-built batch-prefill module. Its update_m_d joins sink[h] * log2(e) to the
#   running max and denominator of KV chunk 0 only (once per row, split-KV or not), in the kernel's log2 domain of
#   sm_scale * q.k * log2(e): the sink is a raw natural-log logit, as in kindex and gpt-oss; lse = m + log2(d)
#   includes it. Upstream wraps it as BatchAttentionWithAttentionSinkWrapper (a BatchPrefillWithPagedKVCacheWrapper
#   with jit_args; not in the slim wheel): sink_wrapper() builds the same from the wheel's own pieces. The variant
#   has no logits soft-cap and declares no RoPE parameters.
# - FlashInfer's CUDA-core decode kernel (include/flashinfer/attention/decode.cuh) has no m/d-update hook, so no
#   variant there can add a sink.
FLASHINFER_SINK_LIMITS = {
    "flashinfer_cuda": "FlashInfer 0.7.2's CUDA-core decode has no attention sink: run(sinks=...) drops it on the fa2 "
                       "backend and its kernel has no m/d hook for the AttentionSink variant",
    "soft_cap": "FlashInfer 0.7.2's only fa2 sink path, the AttentionSink variant, has no logits soft-cap",
    "rope": "FlashInfer 0.7.2's AttentionSink variant declares no RoPE parameters (pos_encoding_mode NONE only)",
}


class DatasetError(ValueError):
    pass


# ------------------------------------------------------------------------------------------------------------------
# Safetensors (stdlib + numpy; the `safetensors` package where it imports)
# ------------------------------------------------------------------------------------------------------------------
SAFETENSORS_DTYPES = {"BOOL": "|b1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "U16": "<u2", "I32": "<i4",
                      "U32": "<u4", "I64": "<i8", "U64": "<u8", "F16": "<f2", "F32": "<f4", "F64": "<f8"}
SAFETENSORS_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "I32": 4, "U32": 4, "I64": 8, "U64": 8,
                        "F16": 2, "BF16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def read_safetensors_header(path):
    """(tensors {name: {"dtype", "shape", "data_offsets"}}, metadata, data_start): the header checked as far as
    the file allows (lengths, dtypes, shapes against byte counts, offsets inside the data)."""
    path = pathlib.Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise DatasetError(f"{path}: {size} bytes, too short for a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise DatasetError(f"{path}: header length {n} runs past the end of the file ({size} bytes)")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DatasetError(f"{path}: the header is not JSON: {e}") from e
    if not isinstance(header, dict):
        raise DatasetError(f"{path}: the header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    data_len = size - 8 - n
    for name, spec in header.items():
        try:
            dtype, shape, (begin, end) = spec["dtype"], [int(s) for s in spec["shape"]], spec["data_offsets"]
        except (KeyError, TypeError, ValueError) as e:
            raise DatasetError(f"{path}: tensor '{name}': malformed entry {spec!r}") from e
        if dtype not in SAFETENSORS_ITEMSIZE:
            raise DatasetError(f"{path}: tensor '{name}': unknown dtype {dtype}")
        count = math.prod(shape)
        if not (0 <= begin <= end <= data_len) or end - begin != count * SAFETENSORS_ITEMSIZE[dtype]:
            raise DatasetError(f"{path}: tensor '{name}': data_offsets [{begin}, {end}] do not hold {dtype} "
                               f"{shape} inside the {data_len}-byte data")
    return header, metadata, 8 + n


def read_safetensors(path, keys=None, use_library=True):
    """{name: numpy array} for `keys` (default: every tensor). BF16 and FP8 come back as raw unsigned integers."""
    import numpy as np
    header, _, start = read_safetensors_header(path)
    keys = list(header) if keys is None else list(keys)
    missing = [k for k in keys if k not in header]
    if missing:
        raise DatasetError(f"{path}: no tensor {', '.join(missing)} (it has: {', '.join(sorted(header)) or 'none'})")
    if use_library:
        try:
            from safetensors.numpy import load_file
        except ImportError:
            pass
        else:
            if all(header[k]["dtype"] in SAFETENSORS_DTYPES for k in keys):
                loaded = load_file(str(path))
                return {k: loaded[k] for k in keys}
    out = {}
    with open(path, "rb") as f:
        for k in keys:
            spec = header[k]
            begin, end = spec["data_offsets"]
            f.seek(start + begin)
            raw = f.read(end - begin)
            dt = SAFETENSORS_DTYPES.get(spec["dtype"]) or {1: "|u1", 2: "<u2"}[SAFETENSORS_ITEMSIZE[spec["dtype"]]]
            out[k] = np.frombuffer(raw, dtype=dt).astype(np.dtype(dt).newbyteorder("="), copy=True).reshape(
                spec["shape"])
    return out


def write_safetensors(path, tensors, metadata=None):
    """numpy arrays as a safetensors file (tests and hand-made datasets)."""
    import numpy as np
    codes = {np.dtype(v).newbyteorder("<").str: k for k, v in SAFETENSORS_DTYPES.items()}
    codes["|b1"], codes["|u1"], codes["|i1"] = "BOOL", "U8", "I8"
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        le = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        code = codes.get(le.dtype.str)
        if code is None:
            raise ValueError(f"{name}: dtype {arr.dtype} has no safetensors code here")
        data = le.tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


# ------------------------------------------------------------------------------------------------------------------
# Datasets (no GPU)
# ------------------------------------------------------------------------------------------------------------------
def _is_decode_definition(d):
    q = d.get("inputs", {}).get("q", {}).get("shape")
    return (d.get("op_type") == OP_TYPE and q == ["batch_size", "num_qo_heads", "head_dim"]
            and "qo_indptr" not in d.get("inputs", {}))


def load_dataset(path, name=None):
    """{"name", "path", "cases", "definitions", "skipped_definitions"}. Each case: dataset, definition, index,
    label ("<definition>#<index>"), uuid, batch_size, num_pages, num_kv_indices, sm_scale, hq, hkv, d, ps (the
    names torch_decode_baselines.py uses), tables {input: {"path", "tensor_key"}}. Every safetensors header is
    read and checked against the axes here; the values are read per case (load_tables)."""
    root = pathlib.Path(path)
    name = name or root.resolve().name
    def_dir, wl_dir = root / "definitions" / OP_TYPE, root / "workloads" / OP_TYPE
    if not def_dir.is_dir():
        raise DatasetError(f"{root}: no definitions/{OP_TYPE}/ folder (write a dataset with: kindex catalog "
                           f"export --out DIR)")
    out = {"name": name, "path": str(root), "cases": [], "definitions": [], "skipped_definitions": {}}
    headers = {}
    for def_file in sorted(def_dir.glob("*.json")):
        try:
            d = json.loads(def_file.read_text())
        except json.JSONDecodeError as e:
            raise DatasetError(f"{def_file}: not JSON: {e}") from e
        dname = d.get("name", def_file.stem)
        if not _is_decode_definition(d):
            out["skipped_definitions"][dname] = "not a paged decode definition (q is not [batch_size, heads, dim])"
            continue
        axes = d.get("axes", {})
        consts = {}
        for a in CONST_AXES:
            spec = axes.get(a, {})
            if spec.get("type") != "const" or not isinstance(spec.get("value"), int):
                raise DatasetError(f"{def_file}: axis '{a}' must be a const integer (got {spec!r})")
            consts[a] = spec["value"]
        if consts["num_qo_heads"] % consts["num_kv_heads"]:
            raise DatasetError(f"{def_file}: num_qo_heads {consts['num_qo_heads']} is not a multiple of "
                               f"num_kv_heads {consts['num_kv_heads']}")
        has_last = "kv_last_page_len" in d.get("inputs", {})
        wl_file = wl_dir / f"{dname}.jsonl"
        if not wl_file.is_file():
            out["skipped_definitions"][dname] = f"no workloads/{OP_TYPE}/{dname}.jsonl"
            continue
        out["definitions"].append(dname)
        lines = [l for l in wl_file.read_text().splitlines() if l.strip()]
        for i, line in enumerate(lines):
            where = f"{wl_file}:{i + 1}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{where}: not JSON: {e}") from e
            w = rec.get("workload", rec)
            wa, inputs = w.get("axes", {}), w.get("inputs", {})
            for a in ("batch_size", "num_pages", "num_kv_indices"):
                if not isinstance(wa.get(a), int) or wa[a] < 0:
                    raise DatasetError(f"{where}: axis '{a}' missing or not a non-negative integer ({wa.get(a)!r})")
            if wa["num_pages"] < 1:
                raise DatasetError(f"{where}: num_pages = {wa['num_pages']}, want >= 1")
            for t in ("q", "k_cache", "v_cache"):
                if inputs.get(t, {}).get("type") != "random":
                    raise DatasetError(f"{where}: input '{t}' is {inputs.get(t)!r}; this runner draws it (want "
                                       f"\"random\")")
            s = inputs.get("sm_scale")
            if s is None:
                sm_scale = 1.0 / math.sqrt(consts["head_dim"])
            elif s.get("type") == "scalar" and isinstance(s.get("value"), (int, float)):
                sm_scale = float(s["value"])
            else:
                raise DatasetError(f"{where}: sm_scale must be a scalar input (got {s!r})")
            tables = {}
            for t in TABLE_INPUTS:
                if t == "kv_last_page_len" and not has_last:
                    continue
                spec = inputs.get(t)
                if not spec or spec.get("type") != "safetensors":
                    raise DatasetError(f"{where}: page-table input '{t}' is {spec!r}, want a safetensors file "
                                       f"(the bundled workloads' \"random\" tables: export them with kindex catalog "
                                       f"export)")
                f = (root / spec["path"]).resolve()
                if not f.is_file():
                    raise DatasetError(f"{where}: {t}: {spec['path']}: no such file under {root}")
                tables[t] = {"path": str(f), "tensor_key": spec.get("tensor_key", t)}
            label = f"{dname}#{i}"
            case = {"dataset": name, "definition": dname, "index": i, "label": label,
                    "uuid": w.get("uuid", label), "batch_size": wa["batch_size"], "num_pages": wa["num_pages"],
                    "num_kv_indices": wa["num_kv_indices"], "sm_scale": sm_scale,
                    "hq": consts["num_qo_heads"], "hkv": consts["num_kv_heads"], "d": consts["head_dim"],
                    "ps": consts["page_size"], "tables": tables}
            if "tolerance" in w:
                case["tolerance"] = w["tolerance"]
            want = {"kv_indptr": [wa["batch_size"] + 1], "kv_indices": [wa["num_kv_indices"]],
                    "kv_last_page_len": [wa["batch_size"]]}
            for t, ref in tables.items():
                if ref["path"] not in headers:
                    headers[ref["path"]] = read_safetensors_header(ref["path"])[0]
                h = headers[ref["path"]].get(ref["tensor_key"])
                if h is None:
                    raise DatasetError(f"{where}: {t}: {ref['path']} has no tensor '{ref['tensor_key']}'")
                if h["dtype"] != "I32" or list(h["shape"]) != want[t]:
                    raise DatasetError(f"{where}: {t}: {h['dtype']} {h['shape']} in {ref['path']}, want I32 {want[t]}")
            out["cases"].append(case)
    if not out["cases"] and not out["skipped_definitions"]:
        raise DatasetError(f"{root}: no definitions in {def_dir}")
    return out


def load_datasets(paths):
    """Several dataset folders; names are the folders' names (made unique with #2, #3 ...)."""
    seen, out = {}, []
    for p in paths:
        base = pathlib.Path(p).resolve().name
        seen[base] = seen.get(base, 0) + 1
        out.append(load_dataset(p, name=base if seen[base] == 1 else f"{base}#{seen[base]}"))
    return out


def select_cases(cases, pattern=None, max_cases=None):
    """--filter REGEX (re.search on "<definition>#<index>") then --max-cases N (the first N)."""
    if pattern:
        rx = re.compile(pattern)
        cases = [c for c in cases if rx.search(c["label"])]
    if max_cases is not None:
        cases = cases[:max_cases]
    return cases


def load_tables(case):
    """int32 numpy (indptr, indices, last) of a case, checked against its axes (torch_decode_baselines.check_tables);
    last is all ones for a definition without kv_last_page_len."""
    import torch_decode_baselines as tdb
    arrays = {}
    by_file = {}
    for t, ref in case["tables"].items():
        by_file.setdefault(ref["path"], []).append((t, ref["tensor_key"]))
    for path, items in by_file.items():
        got = read_safetensors(path, [k for _, k in items])
        for t, k in items:
            arrays[t] = got[k]
    where = {t: f"{case['tables'][t]['path']}:{case['tables'][t]['tensor_key']}" for t in case["tables"]}
    try:
        return tdb.check_tables(case, arrays["kv_indptr"], arrays["kv_indices"], arrays.get("kv_last_page_len"),
                                where["kv_indptr"], where["kv_indices"], where.get("kv_last_page_len", "-"))
    except tdb.TableError as e:
        raise DatasetError(str(e)) from e


def case_seed(seed, label):
    """The inputs' generator seed: a function of --seed and the case label only, so separate processes (TileOPs)
    draw the same q / k_cache / v_cache."""
    return (int(seed) * 1_000_003 + zlib.crc32(label.encode())) % (1 << 62)


# ------------------------------------------------------------------------------------------------------------------
# Page-table geometry (numpy, no GPU)
# ------------------------------------------------------------------------------------------------------------------
def sequence_lengths(indptr, last, page_size):
    """Tokens per sequence: (pages - 1) * page_size + last page length, 0 for a sequence without pages."""
    import numpy as np
    counts = np.diff(np.asarray(indptr, dtype=np.int64))
    last = np.asarray(last, dtype=np.int64)
    return np.where(counts > 0, (counts - 1) * page_size + last, 0)


def block_table(indptr, indices, width=None):
    """Dense [batch, width] int32 page table from CSR (indptr, indices): row b holds sequence b's pages in order,
    padded with page 0 (FA3's, XQA's and TileOPs' block_table). width: at least the longest sequence's page count
    (default exactly that, and at least 1)."""
    import numpy as np
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int32)
    counts = np.diff(indptr)
    batch = len(counts)
    need = int(counts.max()) if batch else 0
    width = max(need, 1) if width is None else int(width)
    if width < need:
        raise ValueError(f"block_table: width {width} < the longest sequence's {need} pages")
    table = np.zeros((batch, width), dtype=np.int32)
    rows = np.repeat(np.arange(batch), counts)
    cols = np.arange(len(indices)) - np.repeat(indptr[:-1], counts)
    table[rows, cols] = indices[indptr[0]:indptr[-1]] if batch else indices[:0]
    return table


def kv_geometry(indptr, indices, last, case, kv_elem=2):
    """tokens, distinct rows, bytes (torch_decode_baselines.kv_rows / bytes_moved), the floor's byte count;
    kv_elem: bytes per KV element (1: fp8)."""
    import torch_decode_baselines as tdb
    tokens, rows = tdb.kv_rows(indptr, indices, last, case["ps"], case["num_pages"])
    return tokens, rows, tdb.bytes_moved(case, rows, kv_elem=kv_elem, q_len=case.get("q_len", 1))


# ------------------------------------------------------------------------------------------------------------------
# Decode variants (--kv-dtype, --layout, --q-len, --window, --soft-cap, --sinks, --rope, --k-scale, --v-scale)
# ------------------------------------------------------------------------------------------------------------------
DEFAULT_VARIANT = {"kv_dtype": "bf16", "layout": "NHD", "q_len": 1, "window": -1, "soft_cap": 0.0, "sinks": False,
                   "rope": False, "k_scale": 1.0, "v_scale": 1.0}


def variant_of(args):
    """The variant options; with --rope also rope_scale / rope_theta (absent otherwise, so rows of runs without RoPE
    keep their identity, row_key)."""
    variant = {k: getattr(args, k) for k in DEFAULT_VARIANT}
    if variant["rope"]:
        variant.update(rope_scale=args.rope_scale, rope_theta=args.rope_theta)
    return variant


def is_default(variant):
    return variant == DEFAULT_VARIANT


def decode_options(variant, sinks=None):
    """The variant as kindex.paged_decode / decode_reference take it (FlashInfer's names), but for the KV dtype.
    RoPE's rope_scale / rope_theta are given explicitly (FlashInfer's defaults 1 and 1e4 unless set), so kindex,
    FlashInfer and the reference all rotate with the same ones."""
    options = dict(kv_layout=variant["layout"], q_len_per_req=variant["q_len"], window_left=variant["window"],
                   logits_soft_cap=variant["soft_cap"], sinks=sinks,
                   pos_encoding_mode="ROPE_LLAMA" if variant["rope"] else "NONE", k_scale=variant["k_scale"],
                   v_scale=variant["v_scale"])
    if variant["rope"]:
        options.update(rope_scale=float(variant.get("rope_scale", 1.0)),
                       rope_theta=float(variant.get("rope_theta", 1e4)))
    return options


def variant_reference(t, case, variant):
    """python/tests/decode_reference.py (the definition, every variant) in float32: (output in q's dtype, lse)."""
    tests = str(pathlib.Path(__file__).resolve().parents[2] / "python" / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import decode_reference
    torch = t.torch
    last = t.last_np.tolist() if case["ps"] > 1 else None
    out, lse = decode_reference.reference_decode(t.q, t.k_cache, t.v_cache, t.indptr_np.tolist(),
                                                 t.indices_np.tolist(), last, case["sm_scale"],
                                                 dtype=torch.float32, **decode_options(variant, t.sinks))
    return out.to(t.q.dtype), lse


# ------------------------------------------------------------------------------------------------------------------
# fp32 reference (torch, any device)
# ------------------------------------------------------------------------------------------------------------------
def reference_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale,
                     budget_bytes=256 << 20):
    """Paged GQA decode in fp32 on q's device: (output [B, Hq, D] in q's dtype, lse [B, Hq] fp32, base 2).

    kv_indptr / kv_last_page_len: host integer sequences (numpy or lists; last all ones for page size 1);
    kv_indices: a tensor on q's device. Query head h reads KV head h // (Hq / Hkv). An empty sequence gives zeros
    and lse -inf. Memory: sequences are sorted by length and taken in groups, tokens in chunks, so the gathered
    fp32 K (or V) of one step stays within budget_bytes (a step's peak is ~4 x that); softmax is accumulated
    online across chunks (running max, sum, output), in fp32."""
    import numpy as np
    import torch
    batch, hq, d = q.shape
    pages, ps, hkv, _ = k_cache.shape
    group = hq // hkv
    dev = q.device
    indptr = np.asarray(kv_indptr, dtype=np.int64)
    lens = sequence_lengths(indptr, kv_last_page_len, ps)
    out = torch.zeros(batch, hq, d, dtype=torch.float32, device=dev)
    lse = torch.full((batch, hq), -math.inf, dtype=torch.float32, device=dev)
    kf = k_cache.reshape(pages * ps, hkv, d)
    vf = v_cache.reshape(pages * ps, hkv, d)
    indices = kv_indices.to(device=dev, dtype=torch.int64)
    order = np.argsort(-lens, kind="stable")
    order = order[lens[order] > 0]
    step_tokens = max(int(budget_bytes) // (hkv * d * 4), 1)
    i = 0
    while i < len(order):
        longest = int(lens[order[i]])
        chunk = min(longest, step_tokens)
        nb = max(1, min(len(order) - i, step_tokens // chunk))
        grp = order[i:i + nb]
        i += nb
        bidx = torch.from_numpy(grp.astype(np.int64)).to(dev)
        glen = torch.from_numpy(lens[grp].astype(np.int64)).to(dev)
        gstart = torch.from_numpy(indptr[grp].astype(np.int64)).to(dev)
        qg = q.index_select(0, bidx).float().view(nb, hkv, group, d)
        m = torch.full((nb, hkv, group), -math.inf, dtype=torch.float32, device=dev)
        s = torch.zeros(nb, hkv, group, dtype=torch.float32, device=dev)
        acc = torch.zeros(nb, hkv, group, d, dtype=torch.float32, device=dev)
        for t0 in range(0, longest, chunk):
            t = torch.arange(t0, min(t0 + chunk, longest), device=dev)
            valid = t[None, :] < glen[:, None]  # [nb, c]
            page_at = torch.where(valid, gstart[:, None] + t[None, :] // ps, gstart[:, None])
            rows = indices[page_at] * ps + (t % ps)[None, :]
            rows = torch.where(valid, rows, indices[gstart][:, None] * ps)  # masked: a row that exists
            k = kf[rows].float()  # [nb, c, hkv, d]
            logits = torch.einsum("bhgd,bchd->bhgc", qg, k) * float(sm_scale)
            del k
            logits.masked_fill_(~valid[:, None, None, :], -math.inf)
            m_new = torch.maximum(m, logits.amax(dim=-1))  # finite: token 0 of every sequence is in chunk 0
            alpha = torch.exp(m - m_new)
            p = torch.exp(logits - m_new[..., None])
            del logits
            s = s * alpha + p.sum(dim=-1)
            v = vf[rows].float()
            acc = acc * alpha[..., None] + torch.einsum("bhgc,bchd->bhgd", p, v)
            del p, v
            m = m_new
        out[bidx] = (acc / s[..., None]).reshape(nb, hq, d)
        lse[bidx] = ((m + torch.log(s)) / LN2).reshape(nb, hq)
        del qg, m, s, acc
    return out.to(q.dtype), lse


def reference_peak_bytes(case, budget_bytes):
    """What reference_decode may hold at once besides its inputs (the gathered chunk in bf16 and fp32, einsum's
    copies, logits), plus its outputs."""
    return 5 * budget_bytes + case["batch_size"] * case["hq"] * (case["d"] * 6 + 4)


# ------------------------------------------------------------------------------------------------------------------
# Implementations (torch, CUDA)
# ------------------------------------------------------------------------------------------------------------------
def flashinfer_sink_limit(name, variant):
    """Why FlashInfer's fa2 wrapper `name` cannot compute the variant's sinks (FLASHINFER_SINKS), or None."""
    if name not in FLASHINFER_FA2 or not variant or not variant.get("sinks"):
        return None
    if name == "flashinfer_cuda":
        return FLASHINFER_SINK_LIMITS["flashinfer_cuda"]
    if variant.get("soft_cap"):
        return FLASHINFER_SINK_LIMITS["soft_cap"]
    if variant.get("rope"):
        return FLASHINFER_SINK_LIMITS["rope"]
    return None


def known_limits(name, case, capability):
    """Why an implementation's documented limits exclude the case, or None. The call is still tried: its own error
    is recorded next to this reason (FlashInfer's sink limits: its set-up refuses, since the call would not fail)."""
    g = case["hq"] // case["hkv"]
    major = int(str(capability).split(".")[0]) if capability else 0
    sink_limit = flashinfer_sink_limit(name, case.get("variant"))
    if sink_limit:
        return sink_limit
    if name == "kindex":
        if case["d"] not in (64, 128, 256):
            return "kindex takes head_dim 64, 128, 256"
        if not 1 <= case["ps"] <= 128:
            return "kindex takes page sizes 1..128"
    if name == "flashinfer_cuda" and case.get("q_len", 1) > 1:
        return "FlashInfer's CUDA-core decode takes one query token per request (q_len_per_req > 1: tensor cores)"
    if name == "flashinfer_cuda" and g not in FLASHINFER_CUDA_GROUPS:
        return (f"FlashInfer's CUDA-core decode takes group sizes {', '.join(map(str, FLASHINFER_CUDA_GROUPS))} "
                f"(this case: {g})")
    if name == "flashinfer_xqa":
        if case["ps"] not in (16, 32, 64, 128):
            return f"XQA takes page sizes 16, 32, 64, 128 (this case: {case['ps']})"
        if major not in (9, 10, 12):
            return f"XQA runs on sm_90, sm_100, sm_120 (this device: {capability})"
        if case["d"] % 16 or not 16 <= case["d"] <= 512:
            return f"XQA takes head_dim a multiple of 16 in [16, 512] (this case: {case['d']})"
    if name == "fa3":
        if major != 9:
            return f"this FA3 build is sm_90a only (this device: {capability})"
        if case["d"] not in (64, 128, 256):
            return f"this FA3 build has head_dim 64, 128, 256 (this case: {case['d']})"
    return None


class Context:
    """What the process loaded once: torch, libkindex, FlashInfer (+ its wrappers and XQA workspace), FA3, TileOPs;
    `status` per requested implementation ("ok" or "not installed: <reason>")."""

    def __init__(self, args):
        import torch
        self.torch = torch
        self.status, self.meta = {}, {}
        self.kindex = self.flashinfer = self.fa3 = self.tileops_op = None
        self.fi_wrappers, self.fi_sink_wrappers, self.xqa_workspace = {}, {}, None
        self.capability = "{}.{}".format(*torch.cuda.get_device_capability())
        self.layout = args.layout
        impls = args.impls
        if "kindex" in impls:
            try:
                self.kindex = db.Kindex(args.lib)
                self.status["kindex"] = "ok"
                self.meta["kindex"] = {"library": str(args.lib), "version": self.kindex.version,
                                       "entry_points": (list(db.PAGED_DECODE_SPLIT) if self.kindex.has_plan_run
                                                        else ["kindex_paged_decode"])}
            except db.KindexError as e:
                self.status["kindex"] = f"not installed: {e}"
        if any(n.startswith("flashinfer") for n in impls):
            self._load_flashinfer(impls)
        if "fa3" in impls:
            try:
                import flash_attn_interface as fa3
                self.fa3 = fa3
                self.status["fa3"] = "ok"
                self.meta["fa3"] = {"path": str(pathlib.Path(fa3.__file__).parent)}
                try:
                    from flash_attn_config import CONFIG
                    self.meta["fa3"]["build_flags"] = {k: v for k, v in CONFIG["build_flags"].items() if v}
                except Exception:  # noqa: BLE001 -- informational only
                    pass
            except Exception as e:  # noqa: BLE001
                self.status["fa3"] = f"not installed: import flash_attn_interface failed: {type(e).__name__}: {e}"
        if "tileops" in impls:
            try:
                import tileops
                from tileops.attention import GQAPagedFwdOp
                self.tileops_op = GQAPagedFwdOp
                self.status["tileops"] = "ok"
                self.meta["tileops"] = {"version": getattr(tileops, "__version__", "?"),
                                        "path": str(pathlib.Path(tileops.__file__).parent)}
            except Exception as e:  # noqa: BLE001
                self.status["tileops"] = f"not installed: import tileops.attention failed: {type(e).__name__}: {e}"

    def _load_flashinfer(self, impls):
        torch = self.torch
        wanted = [n for n in impls if n.startswith("flashinfer")]
        try:
            import flashinfer
        except Exception as e:  # noqa: BLE001
            for n in wanted:
                self.status[n] = f"not installed: import flashinfer failed: {type(e).__name__}: {e}"
            return
        self.flashinfer = flashinfer
        root = pathlib.Path(flashinfer.__file__).parent
        self.meta["flashinfer"] = {"version": getattr(flashinfer, "__version__", "?"), "path": str(root),
                                   "slim": bool(getattr(flashinfer, "SLIM", False))}
        for n in wanted:
            if n in FLASHINFER_FA2:
                try:  # one 128 MB float workspace each, as FlashInfer recommends
                    ws = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=DEVICE)
                    self.fi_wrappers[n] = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                        ws, self.layout, use_tensor_cores=FLASHINFER_FA2[n], backend="fa2")
                    self.status[n] = "ok"
                except Exception as e:  # noqa: BLE001
                    self.status[n] = (f"not installed: BatchDecodeWithPagedKVCacheWrapper failed: "
                                      f"{type(e).__name__}: {e}")
            elif n == "flashinfer_xqa":
                try:
                    import flashinfer.decode  # noqa: F401
                    import flashinfer.jit.xqa  # noqa: F401
                    if not (root / "data/csrc/xqa/mha.cu").is_file():
                        raise ImportError(f"{root}/data/csrc/xqa/mha.cu missing")
                    if not hasattr(flashinfer.decode, "trtllm_batch_decode_with_kv_cache"):
                        raise ImportError("flashinfer.decode has no trtllm_batch_decode_with_kv_cache")
                    # "Must be initialized to 0 for its first use": the first 8 MB are XQA's semaphores.
                    self.xqa_workspace = torch.zeros(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8,
                                                     device=DEVICE)
                    self.status[n] = "ok"
                except Exception as e:  # noqa: BLE001
                    self.status[n] = (f"not installed: this FlashInfer has no XQA ({type(e).__name__}: {e}); put "
                                      f"the build that keeps it ahead on sys.path")

    def ok(self, name):
        return self.status.get(name) == "ok"

    def sink_wrapper(self, head_dim, kv_dtype, window_left):
        """FlashInfer's fa2 attention-sink wrapper (FLASHINFER_SINKS), one per (head_dim, KV dtype, window or not);
        the first call JIT-builds its module. Returns (wrapper, seconds spent here)."""
        key = (head_dim, kv_dtype, window_left >= 0)
        t0 = time.perf_counter()
        if key not in self.fi_sink_wrappers:
            self.fi_sink_wrappers[key] = make_sink_wrapper(self.flashinfer, self.torch, self.layout, *key)
        return self.fi_sink_wrappers[key], time.perf_counter() - t0


def make_sink_wrapper(flashinfer, torch, layout, head_dim, kv_dtype, sliding_window, workspace_bytes=None):
    """BatchPrefillWithPagedKVCacheWrapper(backend="fa2") running the AttentionSink variant: the pieces of upstream's
    BatchAttentionWithAttentionSinkWrapper (additional tensor "sink" float [num_qo_heads], scalar "sm_scale"),
    named per head_dim and KV dtype so that each JIT module gets its own build. run(q, kv, sinks, sm_scale, ...)."""
    from flashinfer.jit.attention.variants import attention_sink_decl
    kv_name = str(kv_dtype).removeprefix("torch.")
    jit_args = [f"kindex_suite_attention_sink_bf16_{kv_name}_d{head_dim}_swa_{sliding_window}_fa2",
                torch.bfloat16, kv_dtype, torch.bfloat16, torch.int32, head_dim, head_dim,
                ["sink"], ["float"], ["sm_scale"], ["double"], "AttentionSink", attention_sink_decl["fa2"]]
    # As the wheel's own gen_batch_prefill_attention_sink_module: K/V strides independent (one instantiation set).
    jit_kwargs = dict(pos_encoding_mode=0, use_sliding_window=sliding_window, use_fp16_qk_reduction=False,
                      paged_kv_stride_mode="independent")
    ws = torch.zeros(workspace_bytes or FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=DEVICE)
    return flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, layout, backend="fa2", jit_args=jit_args,
                                                          jit_kwargs=jit_kwargs)


class CaseTensors:
    """One case's device tensors: the drawn inputs, the page table (CSR on device and host, dense block table on
    demand), sequence lengths."""

    def __init__(self, torch, case, tables, seed, variant=DEFAULT_VARIANT):
        self.torch, self.case, self.variant = torch, case, variant
        dev = torch.device(DEVICE)
        indptr, indices, last = tables
        self.indptr_np, self.indices_np, self.last_np = indptr, indices, last
        b, hq, hkv, d, ps, pages = (case[k] for k in ("batch_size", "hq", "hkv", "d", "ps", "num_pages"))
        self.indptr_h = torch.from_numpy(indptr.copy())
        self.last_h = torch.from_numpy(last.copy())
        self.indptr = self.indptr_h.to(dev)
        self.indices = torch.from_numpy(indices.copy()).to(dev)
        self.last = self.last_h.to(dev)
        self.lens_np = sequence_lengths(indptr, last, ps)
        self.seq_lens = torch.from_numpy(self.lens_np.astype("int32")).to(dev)
        self.max_seq_len = int(self.lens_np.max()) if b else 0
        gen = torch.Generator(device=dev)
        gen.manual_seed(seed)
        self.q = torch.randn(b * variant["q_len"], hq, d, generator=gen, dtype=torch.bfloat16, device=dev)
        self.k_cache = torch.randn(pages, ps, hkv, d, generator=gen, dtype=torch.bfloat16, device=dev)
        self.v_cache = torch.randn(pages, ps, hkv, d, generator=gen, dtype=torch.bfloat16, device=dev)
        # The variant's caches from the same draw: HND transposed, fp8 converted (--fp8-vs-bf16 compares like data).
        if variant["layout"] == "HND":
            self.k_cache, self.v_cache = (c.transpose(1, 2).contiguous() for c in (self.k_cache, self.v_cache))
        kv_dtype = getattr(torch, KV_DTYPES[variant["kv_dtype"]])
        if kv_dtype != torch.bfloat16:
            self.k_cache, self.v_cache = self.k_cache.to(kv_dtype), self.v_cache.to(kv_dtype)
        self.sinks = (2.0 * torch.randn(hq, generator=gen, device=dev)) if variant["sinks"] else None
        self._table = None

    def table(self):
        """[B, max_pages] int32 on the device (built once, outside timing)."""
        if self._table is None:
            self._table = self.torch.from_numpy(block_table(self.indptr_np, self.indices_np)).to(DEVICE)
        return self._table

    def checksum(self):
        """Sums of the drawn inputs (fp64, in 16M-element pieces: no full-size copy), so two processes' files can be
        checked to have used the same inputs (CUDA's randn depends on the launch shape, so on the device too)."""
        torch = self.torch
        out = {}
        for k in ("q", "k_cache", "v_cache"):
            flat = getattr(self, k).reshape(-1)
            total = torch.zeros((), dtype=torch.float64, device=flat.device)
            for piece in flat.split(1 << 24):
                total += piece.double().sum()
            out[k] = float(total)
        return out


class Impl:
    """call() -> raw result tuple (timed); result(raw) -> (output [B, Hq, D], lse base 2 [B, Hq] or None)."""
    lse = True

    def __init__(self, ctx, case, t):
        self.ctx, self.case, self.t, self.torch = ctx, case, t, ctx.torch
        self.info = {}

    def call(self):
        raise NotImplementedError

    def result(self, raw):
        return raw[0], (raw[1] if self.lse else None)

    def extra_timings(self, timer, warmup, iters):
        return {}


class KindexImpl(Impl):
    def __init__(self, ctx, case, t):
        super().__init__(ctx, case, t)
        torch, kx = self.torch, ctx.kindex
        self.kx = kx
        self.out = torch.empty_like(t.q)
        self.lse_buf = torch.empty(t.q.shape[0], case["hq"], dtype=torch.float32, device=DEVICE)
        self.params = db.paged_decode_params(t.q, t.k_cache, t.v_cache, t.indptr, t.indices,
                                             t.last if case["ps"] > 1 else None, case["sm_scale"], self.out,
                                             self.lse_buf, num_kv_indices=case["num_kv_indices"],
                                             **decode_options(t.variant, t.sinks))
        self.ws_bytes = kx.workspace_size("kindex_paged_decode", self.params)
        self.ws = torch.empty(max(self.ws_bytes, 1), dtype=torch.uint8, device=DEVICE)
        self.stream = torch.cuda.current_stream().cuda_stream
        self.split = kx.has_plan_run
        self.info = {"workspace_bytes": self.ws_bytes,
                     "entry_point": ("kindex_paged_decode_run after one kindex_paged_decode_plan" if self.split
                                     else "kindex_paged_decode")}
        if self.split:
            self.plan()

    def _call(self, fn):
        self.kx.call(fn, self.params, self.ws.data_ptr(), self.ws_bytes, self.stream)

    def plan(self):
        self._call("kindex_paged_decode_plan")

    def run(self):
        self._call("kindex_paged_decode_run")

    def call(self):
        if self.split:
            self.run()
        else:
            self._call("kindex_paged_decode")
        return self.out, self.lse_buf

    def extra_timings(self, timer, warmup, iters):
        if not self.split:
            return {}

        def both():
            self.plan()
            self.run()
        plan = timer.time(self.plan, warmup, iters)
        plan_run = timer.time(both, warmup, iters)
        self.info["plan_plus_run"] = plan_run
        return {"kindex_plan": dict(plan, entry_point="kindex_paged_decode_plan alone")}


class FlashInferFa2Impl(Impl):
    def __init__(self, ctx, case, t, name, plan_repeats):
        super().__init__(ctx, case, t)
        torch, c = self.torch, case
        options = decode_options(t.variant, t.sinks)
        self.run_args = ()
        info = {}
        if t.sinks is None:
            wrapper = ctx.fi_wrappers[name]
            variant_plan = {} if is_default(t.variant) else dict(
                q_len_per_req=options["q_len_per_req"], window_left=options["window_left"],
                logits_soft_cap=options["logits_soft_cap"], pos_encoding_mode=options["pos_encoding_mode"],
                **{k: options[k] for k in ("rope_scale", "rope_theta") if k in options})
            self.run_options = {} if is_default(t.variant) else {k: options[k] for k in ("k_scale", "v_scale")}

            def plan():
                wrapper.plan(t.indptr_h, t.indices, t.last_h, c["hq"], c["hkv"], c["d"], c["ps"],
                             q_data_type=torch.bfloat16, kv_data_type=t.k_cache.dtype, sm_scale=c["sm_scale"],
                             **variant_plan)
        else:
            # Not run(sinks=...): FlashInfer's fa2 decode drops it (FLASHINFER_SINKS). The AttentionSink variant on
            # the tensor-core (batch-prefill) kernel instead, one query row per token of each request.
            limit = flashinfer_sink_limit(name, t.variant)
            if limit:
                raise NotImplementedError(limit)
            wrapper, build_s = ctx.sink_wrapper(c["d"], t.k_cache.dtype, options["window_left"])
            q_len = options["q_len_per_req"]
            qo_indptr = torch.arange(0, (c["batch_size"] + 1) * q_len, q_len, dtype=torch.int32)
            # k_scale is folded into the variant's sm_scale as FlashInfer's run() does; v_scale scales the output
            # after the kernel (run(v_scale=...)), as for every fa2 path.
            self.run_args = (t.sinks, float(c["sm_scale"]) * options["k_scale"])
            self.run_options = {"v_scale": options["v_scale"]} if options["v_scale"] != 1.0 else {}
            info = {"sinks_via": "AttentionSink variant: BatchPrefillWithPagedKVCacheWrapper(backend='fa2', "
                                 "jit_args) run(q, kv, sinks, sm_scale); not run(sinks=...), which fa2 drops",
                    "sink_module_build_s": build_s}

            def plan():
                # causal among a request's q_len rows (bottom-right aligned, as the decode wrapper plans q_len > 1)
                wrapper.plan(qo_indptr, t.indptr_h, t.indices, t.last_h, c["hq"], c["hkv"], c["d"], c["ps"],
                             causal=q_len > 1, window_left=options["window_left"], sm_scale=c["sm_scale"],
                             q_data_type=torch.bfloat16, kv_data_type=t.k_cache.dtype)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        plan()  # the first plan of a module JIT-compiles it (--prebuild does that before the cases)
        first_s = time.perf_counter() - t0
        host_us = []
        for _ in range(plan_repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            plan()
            host_us.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        self.info = dict(info, first_plan_s=first_s, backend="fa2", use_tensor_cores=FLASHINFER_FA2[name])
        if host_us:
            self.info["plan_host_us"] = db.summarize(host_us)
        self.out = torch.empty_like(t.q)
        self.lse_buf = torch.empty(t.q.shape[0], c["hq"], dtype=torch.float32, device=DEVICE)
        self.kv = (t.k_cache, t.v_cache)
        self.wrapper = wrapper

    def call(self):
        self.wrapper.run(self.t.q, self.kv, *self.run_args, out=self.out, lse=self.lse_buf, return_lse=True,
                         **self.run_options)
        return self.out, self.lse_buf


class FlashInferXqaImpl(Impl):
    lse = False

    def __init__(self, ctx, case, t):
        super().__init__(ctx, case, t)
        self.fn = ctx.flashinfer.decode.trtllm_batch_decode_with_kv_cache
        self.table = t.table()
        self.out = self.torch.empty_like(t.q)
        self.kv = (t.k_cache, t.v_cache)
        self.info = {"backend": "xqa", "kv_layout": "NHD", "block_table_width": int(self.table.shape[1])}

    def call(self):
        c, t = self.case, self.t
        self.fn(t.q, self.kv, self.ctx.xqa_workspace, self.table, t.seq_lens, max(t.max_seq_len, 1),
                bmm1_scale=c["sm_scale"], bmm2_scale=1.0, out=self.out, kv_layout="NHD", backend="xqa")
        return (self.out,)


class Fa3Impl(Impl):
    def __init__(self, ctx, case, t):
        super().__init__(ctx, case, t)
        torch, c, fa3 = self.torch, case, ctx.fa3
        self.table = t.table()
        width = int(self.table.shape[1])
        self.q4 = t.q.view(c["batch_size"], 1, c["hq"], c["d"])
        # FA3's own seqlen_k for a paged cache is width * page_size: the metadata is computed for the same bound.
        self.meta = fa3.get_scheduler_metadata(c["batch_size"], 1, width * c["ps"], c["hq"], c["hkv"], c["d"],
                                               t.seq_lens, qkv_dtype=torch.bfloat16, page_size=c["ps"],
                                               causal=True, num_splits=0)
        self.fn = fa3.flash_attn_with_kvcache
        self.info = {"block_table_width": width, "num_splits": 0, "scheduler_metadata": "precomputed"}

    def call(self):
        c, t = self.case, self.t
        r = self.fn(self.q4, t.k_cache, t.v_cache, cache_seqlens=t.seq_lens, page_table=self.table,
                    softmax_scale=c["sm_scale"], causal=True, num_splits=0, scheduler_metadata=self.meta,
                    return_softmax_lse=True)
        return r[0], r[1]

    def result(self, raw):
        c = self.case
        return (raw[0].view(c["batch_size"], c["hq"], c["d"]),
                raw[1].reshape(c["batch_size"], c["hq"]).float() / LN2)  # natural log -> base 2


class TileOpsImpl(Impl):
    lse = False

    def __init__(self, ctx, case, t):
        super().__init__(ctx, case, t)
        torch, c = self.torch, case
        self.op = ctx.tileops_op(is_causal=True, sm_scale=c["sm_scale"])
        self.table = t.table()
        self.cu_q = torch.arange(c["batch_size"] + 1, dtype=torch.int32, device=DEVICE)
        self.info = {"block_table_width": int(self.table.shape[1])}

    def call(self):
        t = self.t
        return (self.op.forward(t.q, t.k_cache, t.v_cache, self.table, t.seq_lens, self.cu_q),)


def make_impl(name, ctx, case, t, args):
    if name == "kindex":
        return KindexImpl(ctx, case, t)
    if name in FLASHINFER_FA2:
        return FlashInferFa2Impl(ctx, case, t, name, args.plan_repeats)
    if name == "flashinfer_xqa":
        return FlashInferXqaImpl(ctx, case, t)
    if name == "fa3":
        return Fa3Impl(ctx, case, t)
    if name == "tileops":
        return TileOpsImpl(ctx, case, t)
    raise ValueError(name)


class BrokenContext(RuntimeError):
    """The CUDA context no longer works (a kernel faulted): the run stops, --resume goes on in a new process."""


def cuda_alive(torch):
    try:
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


def check_impl(torch, impl, ref_out, ref_lse):
    """Run once, poison what it returned with NaN, run again (so only the second call's writes can pass), compare
    with the reference by the FlashInfer-Bench rule."""
    raw = impl.call()
    torch.cuda.synchronize()
    for x in raw:
        if x.is_floating_point():
            x.fill_(float("nan"))
    del raw
    raw = impl.call()
    torch.cuda.synchronize()
    out, lse = impl.result(raw)
    reports = [db.compare_fib(out, ref_out, "output", **FIB_TOLERANCE)]
    if lse is not None:
        reports.append(db.compare_fib(lse, ref_lse, "lse", **FIB_TOLERANCE))
    return dict(db.combine(reports), outputs=reports, lse_checked=lse is not None)


def run_case(ctx, case, args, timer, copy_rate):
    """One case: tables, inputs, reference, then per implementation set-up, check, timing. Returns the row."""
    torch = ctx.torch
    row = {k: case[k] for k in ("dataset", "definition", "index", "label", "uuid", "batch_size", "num_pages",
                                "num_kv_indices", "sm_scale")}
    row.update(num_qo_heads=case["hq"], num_kv_heads=case["hkv"], head_dim=case["d"], page_size=case["ps"],
               seed=case_seed(args.seed, case["label"]), impls={})
    variant = getattr(args, "variant", DEFAULT_VARIANT)
    if not is_default(variant):
        row["variant"] = dict(variant)
        case = dict(case, q_len=variant["q_len"], variant=dict(variant))
    if "tolerance" in case:  # recorded only: the comparator is FlashInfer-Bench's default rule (FIB_TOLERANCE)
        row["workload_tolerance"] = case["tolerance"]
    try:
        tables = load_tables(case)
    except DatasetError as e:
        row.update(status="error", error=str(e))
        return row
    tokens, rows, nbytes = kv_geometry(*tables, case, kv_elem=1 if variant["kv_dtype"].startswith("fp8") else 2)
    row["kv_bytes_bf16"] = rows * case["hkv"] * case["d"] * 2 * 2  # the --fp8-vs-bf16 goal's case size
    lens = sequence_lengths(tables[0], tables[2], case["ps"])
    row.update(kv_tokens=tokens, kv_rows_unique=rows, bytes=nbytes, floor_us=nbytes / copy_rate * 1e6,
               max_seq_len=int(lens.max()) if len(lens) else 0, empty_sequences=int((lens == 0).sum()))
    kv_bytes = 2 * case["num_pages"] * case["ps"] * case["hkv"] * case["d"] * 2
    counts = tables[0][1:] - tables[0][:-1]
    table_bytes = case["batch_size"] * max(int(counts.max()) if len(counts) else 1, 1) * 4
    need = (kv_bytes + 4 * case["batch_size"] * case["hq"] * case["d"] * 2 + table_bytes
            + reference_peak_bytes(case, args.ref_budget_mb << 20) + (256 << 20))
    gc.collect()
    torch.cuda.empty_cache()
    free = torch.cuda.mem_get_info()[0]
    row["memory"] = {"kv_cache_bytes": kv_bytes, "needed_bytes": need, "free_bytes": free}
    if need > free:
        row["status"] = f"skipped: needs ~{need / 2**30:.1f} GiB (KV cache {kv_bytes / 2**30:.1f} GiB), " \
                        f"{free / 2**30:.1f} GiB free"
        return row
    t = ref_out = ref_lse = None
    try:
        t = CaseTensors(torch, case, tables, row["seed"], variant)
        row["input_checksum"] = t.checksum()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if is_default(variant):
            ref_out, ref_lse = reference_decode(t.q, t.k_cache, t.v_cache, t.indptr_np, t.indices, t.last_np,
                                                case["sm_scale"], budget_bytes=args.ref_budget_mb << 20)
        else:
            ref_out, ref_lse = variant_reference(t, case, variant)
        torch.cuda.synchronize()
        row["reference_s"] = time.perf_counter() - t0
        for name in args.impls:
            row["impls"].update(run_impl(ctx, name, case, t, ref_out, ref_lse, args, timer, nbytes,
                                         row["floor_us"]))
        row["status"] = "done"
    except torch.cuda.OutOfMemoryError as e:
        row["status"] = f"skipped: out of GPU memory: {str(e).splitlines()[0]}"
    finally:
        del t, ref_out, ref_lse
        gc.collect()
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 -- a broken context: the caller stops on the error already raised
            pass
    derive(row)
    return row


def run_impl(ctx, name, case, t, ref_out, ref_lse, args, timer, nbytes, floor_us):
    """{name: entry, [kindex_plan: entry]}: status "ok" (checked and timed), "not installed", "unsupported: ...",
    "error: ..."; timing fields (median_us, p05_us, p95_us, ...), achieved_tb_per_s, ratio_to_floor, correctness."""
    torch = ctx.torch
    if not ctx.ok(name):
        return {name: {"status": "not installed"}}
    limit = known_limits(name, case, ctx.capability)
    impl = None
    entry = {}
    stage = "set-up"
    try:
        impl = make_impl(name, ctx, case, t, args)
        entry.update(impl.info)
        stage = "first call"
        entry["correctness"] = check_impl(torch, impl, ref_out, ref_lse)
        stage = "timing"
        timed = timer.time(impl.call, args.warmup, args.iters)
        extra = impl.extra_timings(timer, args.warmup, args.iters)
        entry.update(timed)
        entry.update(impl.info)
        entry["status"] = "ok"
        out = {name: entry}
        for col, res in extra.items():
            out[col] = dict(res, status="ok")
        for res in out.values():
            if res.get("median_us"):
                res["achieved_tb_per_s"] = nbytes / (res["median_us"] * 1e-6) / 1e12
                res["ratio_to_floor"] = res["median_us"] / floor_us
        return out
    except torch.cuda.OutOfMemoryError as e:
        entry.update(status=f"skipped: out of GPU memory ({stage})", error=str(e).splitlines()[0], stage=stage)
        return {name: entry}
    except Exception as e:  # noqa: BLE001 -- recorded; the run goes on unless the context broke
        msg = f"{type(e).__name__}: {e}".strip()
        if not cuda_alive(torch):
            raise BrokenContext(f"{name} ({case['label']}, {stage}): {msg}") from e
        if limit:
            entry.update(status=f"unsupported: {limit}", error=msg, stage=stage)
        else:
            traceback.print_exc()
            entry.update(status=f"error: {msg}", error=msg, stage=stage)
        return {name: entry}
    finally:
        del impl


# ------------------------------------------------------------------------------------------------------------------
# Prebuilding JIT modules (FlashInfer fa2 decode/prefill per head_dim, XQA per page size / head_dim / group)
# ------------------------------------------------------------------------------------------------------------------
def prebuild(ctx, cases, impls, variant=None):
    """Builds, in parallel threads, every FlashInfer module the cases will load, so JIT time is paid once before the
    timings: a plan() on tiny inputs per (wrapper kind, head_dim), with --sinks flashinfer_tc's AttentionSink module
    per head_dim, and one build_jit_specs over the XQA specs. Returns {task: {"seconds"} or {"error"}}."""
    import concurrent.futures
    torch = ctx.torch
    tasks = {}
    for name in (n for n in FLASHINFER_FA2 if n in impls and ctx.ok(n)):
        for d in sorted({c["d"] for c in cases}):
            def fa2_task(name=name, d=d):
                ws = torch.zeros(16 << 20, dtype=torch.uint8, device=DEVICE)
                w = ctx.flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD",
                                                                      use_tensor_cores=FLASHINFER_FA2[name],
                                                                      backend="fa2")
                one = torch.tensor([0, 1], dtype=torch.int32)
                w.plan(one, torch.zeros(1, dtype=torch.int32, device=DEVICE), torch.ones(1, dtype=torch.int32),
                       4, 1, d, 16, q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
                torch.cuda.synchronize()
            tasks[f"{name} head_dim {d}"] = fa2_task
    if variant and variant.get("sinks") and "flashinfer_tc" in impls and ctx.ok("flashinfer_tc") and \
            flashinfer_sink_limit("flashinfer_tc", variant) is None:
        kv_dtype = getattr(torch, KV_DTYPES[variant["kv_dtype"]])
        for d in sorted({c["d"] for c in cases}):
            tasks[f"flashinfer_tc attention-sink module head_dim {d}"] = (
                lambda d=d: ctx.sink_wrapper(d, kv_dtype, variant["window"]))
    if "flashinfer_xqa" in impls and ctx.ok("flashinfer_xqa"):
        keys = sorted({(c["ps"], c["d"], c["hq"] // c["hkv"]) for c in cases
                       if known_limits("flashinfer_xqa", c, ctx.capability) is None})
        if keys:
            def xqa_task(keys=keys):
                from flashinfer.jit.core import build_jit_specs
                from flashinfer.jit.xqa import gen_xqa_module
                bf16 = torch.bfloat16
                specs = [gen_xqa_module(bf16, bf16, ps, d, g, False, bf16, 1, False) for ps, d, g in keys]
                build_jit_specs(specs, verbose=False)
            tasks["flashinfer_xqa " + ", ".join(f"ps{ps}/d{d}/g{g}" for ps, d, g in keys)] = xqa_task
    results = {}
    if not tasks:
        return results

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    print(f"prebuild: {len(tasks)} task(s) in parallel: {', '.join(tasks)}", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        futures = {pool.submit(timed, fn): key for key, fn in tasks.items()}
        for f in concurrent.futures.as_completed(futures):
            key = futures[f]
            try:
                results[key] = {"seconds": f.result()}
                print(f"prebuild: {key}: {results[key]['seconds']:.1f} s", flush=True)
            except Exception as e:  # noqa: BLE001 -- the case that needs it records the same error
                results[key] = {"error": f"{type(e).__name__}: {e}"}
                print(f"prebuild: {key}: FAILED {results[key]['error']}", flush=True)
    return results


# ------------------------------------------------------------------------------------------------------------------
# Ratios, summaries, merging, the report (no GPU)
# ------------------------------------------------------------------------------------------------------------------
def _entry(row, name):
    e = row.get("impls", {}).get(name)
    return e if isinstance(e, dict) else {}


def _median(row, name):
    return _entry(row, name).get("median_us")


def _passed(row, name):
    return bool(_entry(row, name).get("correctness", {}).get("passed"))


def derive(row):
    """ratio_kindex_vs_<peer> for every peer timed and correct, best_peer / ratio_kindex_vs_best against the
    fastest correct peer (< 1: kindex faster). Recomputed after merging files."""
    for k in [k for k in row if k.startswith("ratio_kindex_vs_")] + ["best_peer", "best_peer_us"]:
        row.pop(k, None)
    kx = _median(row, "kindex")
    correct = {p: _median(row, p) for p in PEERS if _median(row, p) and _passed(row, p)}
    if correct:
        best = min(correct, key=correct.get)
        row["best_peer"], row["best_peer_us"] = best, correct[best]
    if not kx:
        return row
    for p, us in correct.items():
        row[f"ratio_kindex_vs_{p}"] = kx / us
    if correct:
        row["ratio_kindex_vs_best"] = kx / row["best_peer_us"]
    return row


def summarize(rows, implementations=None, worst=5):
    """Per dataset and overall: kindex against the best correct peer and each peer (geomean, faster count, worst
    cases), ratio to the floor, per-implementation counts (timed, comparator passed/checked, unsupported with
    reasons, errors), skipped cases; overall also which peers could not run and why."""
    def block(rs):
        s = {"cases": len(rs), "done": sum(r.get("status") == "done" for r in rs),
             "skipped": {r["label"]: r["status"] for r in rs if str(r.get("status", "")).startswith("skipped")},
             "errors": {r["label"]: r.get("error") for r in rs if r.get("status") == "error"}}
        pairs = [(r["ratio_kindex_vs_best"], r["label"], r.get("best_peer")) for r in rs
                 if r.get("ratio_kindex_vs_best")]
        if pairs:
            s["kindex_vs_best"] = {
                "geomean": db.geomean([p[0] for p in pairs]), "faster": sum(p[0] < 1 for p in pairs),
                "of": len(pairs),
                "worst": [dict(zip(("ratio", "label", "best_peer"), p)) for p in sorted(pairs, reverse=True)[:worst]],
                "best": [dict(zip(("ratio", "label", "best_peer"), p)) for p in sorted(pairs)[:3]]}
        s["kindex_vs"] = {}
        for p in PEERS:
            vals = [r[f"ratio_kindex_vs_{p}"] for r in rs if r.get(f"ratio_kindex_vs_{p}")]
            if vals:
                s["kindex_vs"][p] = {"geomean": db.geomean(vals), "faster": sum(v < 1 for v in vals),
                                     "of": len(vals)}
        s["impls"] = {}
        for name in COLUMNS:
            entries = [_entry(r, name) for r in rs if _entry(r, name)]
            if not entries:
                continue
            checked = [e["correctness"]["passed"] for e in entries if "passed" in e.get("correctness", {})]
            unsupported = {}
            for e in entries:
                if str(e.get("status", "")).startswith("unsupported"):
                    unsupported[e["status"]] = unsupported.get(e["status"], 0) + 1
            lat = [e["median_us"] for e in entries if e.get("median_us")]
            s["impls"][name] = {
                "timed": len(lat), "geomean_us": db.geomean(lat),
                "ratio_to_floor_geomean": db.geomean([e.get("ratio_to_floor") for e in entries]),
                "comparator_passed": sum(checked), "comparator_checked": len(checked),
                "comparator_failed": [r["label"] for r in rs if _entry(r, name).get("correctness", {}).get(
                    "passed") is False],
                "unsupported": unsupported,
                "errors": {r["label"]: _entry(r, name)["error"] for r in rs
                           if str(_entry(r, name).get("status", "")).startswith("error")},
                "not_installed": sum(e.get("status") == "not installed" for e in entries)}
        return s

    out = {"datasets": {}, "overall": block(rows)}
    for name in dict.fromkeys(r["dataset"] for r in rows):
        out["datasets"][name] = block([r for r in rows if r["dataset"] == name])
    if implementations is not None:
        out["peers_unavailable"] = {n: s for n, s in implementations.items() if s.get("status") != "ok"}
    return out


def _case_key(row):
    return row.get("dataset"), row.get("label")


def _entry_rank(e):
    return (bool(e.get("median_us")), "correctness" in e, e.get("status") not in (None, "not installed"))


def merge(docs):
    """Several result files (e.g. the main run and TileOPs' own process) joined by (dataset, label): per case the
    implementations' entries are united (for one named in both, the one that was timed wins); the first file's
    case fields (floor, bytes) stay. Top-level implementations: an "ok" status wins."""
    base = json.loads(json.dumps(docs[0]))
    base.setdefault("merged_from", [docs[0].get("command")])
    index = {_case_key(r): r for r in base.get("cases", [])}
    warnings = []
    for doc in docs[1:]:
        base["merged_from"].append(doc.get("command"))
        for name, st in doc.get("implementations", {}).items():
            if base.setdefault("implementations", {}).get(name, {}).get("status") != "ok":
                base["implementations"][name] = st
        for r in doc.get("cases", []):
            key = _case_key(r)
            mine = index.get(key)
            if mine is None:
                base["cases"].append(json.loads(json.dumps(r)))
                index[key] = base["cases"][-1]
                continue
            if mine.get("uuid") != r.get("uuid"):
                warnings.append(f"{key}: uuid {mine.get('uuid')} vs {r.get('uuid')}: not the same workload, kept the "
                                f"first")
                continue
            if mine.get("seed") != r.get("seed"):
                warnings.append(f"{key}: seeds {mine.get('seed')} vs {r.get('seed')}: different inputs")
            if (mine.get("input_checksum") and r.get("input_checksum")
                    and mine["input_checksum"] != r["input_checksum"]):
                warnings.append(f"{key}: input checksums differ: different inputs")
            for name, e in r.get("impls", {}).items():
                cur = mine.setdefault("impls", {}).get(name)
                if cur is None or _entry_rank(e) > _entry_rank(cur):
                    mine["impls"][name] = e
            if mine.get("status") != "done" and r.get("status") == "done":
                for k, v in r.items():
                    if k != "impls":
                        mine[k] = v
    for r in base.get("cases", []):
        derive(r)
    base["summary"] = summarize(base.get("cases", []), base.get("implementations"))
    if warnings:
        base["merge_warnings"] = warnings
    return base


def _short(label):
    return label.replace("gqa_paged_decode_", "")


def report(doc):
    """Markdown: one table per dataset (median us per implementation, kindex / best correct peer), then the
    summary."""
    rows = doc.get("cases", [])
    present = [c for c in COLUMNS if any(_entry(r, c) for r in rows)]
    abbrev = {"kindex": "kindex", "kindex_plan": "k plan", "flashinfer_tc": "FI tc", "flashinfer_cuda": "FI cuda",
              "flashinfer_xqa": "FI xqa", "fa3": "FA3", "tileops": "TileOPs"}
    lines = []
    dev = doc.get("device", {})
    if dev:
        lines.append(f"Device: {dev.get('name')} (sm_{str(dev.get('capability', '')).replace('.', '')}), torch "
                     f"{dev.get('torch')}, copy rate {doc.get('copy_rate', {}).get('bytes_per_s', 0) / 1e12:.3f} "
                     f"TB/s; {doc.get('protocol', {}).get('iterations', '?')} timed calls, median us, cold L2.")
        lines.append("")
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        rs = [r for r in rows if r["dataset"] == ds]
        lines.append(f"### {ds}")
        lines.append("")
        head = ["case", "B", "tokens", "MB", "floor"] + [abbrev[c] for c in present] + ["k/best", "best", "checks"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head) - 2)) + "|---|---|")
        for r in rs:
            cells = [_short(r["label"]), str(r.get("batch_size", "")), str(r.get("kv_tokens", "")),
                     f"{r['bytes'] / 1e6:.1f}" if r.get("bytes") else "", f"{r['floor_us']:.1f}" if r.get(
                         "floor_us") else ""]
            if r.get("status") != "done":
                cells += ["-"] * len(present) + ["", "", str(r.get("status", "?"))[:60].replace("|", "/")]
                lines.append("| " + " | ".join(cells) + " |")
                continue
            checks = []
            for c in present:
                e = _entry(r, c)
                st = str(e.get("status", ""))
                if e.get("median_us"):
                    mark = "" if e.get("correctness", {}).get("passed", True) else " (F)"
                    cells.append(f"{e['median_us']:.1f}{mark}")
                else:
                    cells.append("n/i" if st == "not installed" else "unsup" if st.startswith("unsupported") else
                                 "ERR" if st.startswith("error") else "OOM" if st.startswith("skipped") else "-")
                if "passed" in e.get("correctness", {}):
                    checks.append("P" if e["correctness"]["passed"] else "F")
            ratio = r.get("ratio_kindex_vs_best")
            cells += [f"{ratio:.3f}" if ratio else "-", abbrev.get(r.get("best_peer"), "-"), "".join(checks)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    summary = doc.get("summary") or summarize(rows, doc.get("implementations"))
    lines.append("### Summary")
    lines.append("")
    for scope, s in [("overall", summary["overall"])] + list(summary["datasets"].items()):
        kb = s.get("kindex_vs_best")
        head = f"- **{scope}**: {s['done']} of {s['cases']} cases run"
        if s["skipped"]:
            head += f", {len(s['skipped'])} skipped"
        if kb:
            head += (f"; kindex / best correct peer: geomean {kb['geomean']:.3f}, kindex faster on {kb['faster']} "
                     f"of {kb['of']}; worst " + ", ".join(f"{_short(w['label'])} {w['ratio']:.3f} "
                                                          f"({abbrev.get(w['best_peer'], w['best_peer'])})"
                                                          for w in kb["worst"][:3]))
        lines.append(head)
        if s["errors"]:
            first = next(iter(s["errors"].items()))
            lines.append(f"  - {len(s['errors'])} case(s) failed before timing, first {_short(first[0])}: "
                         f"{str(first[1])[:160]}")
        if s["kindex_vs"]:
            lines.append("  - kindex / peer (geomean, faster of): " + "; ".join(
                f"{abbrev[p]} {v['geomean']:.3f} ({v['faster']} of {v['of']})" for p, v in s["kindex_vs"].items()))
        floors = [f"{abbrev[n]} {v['ratio_to_floor_geomean']:.2f}" for n, v in s["impls"].items()
                  if v.get("ratio_to_floor_geomean")]
        if floors:
            lines.append("  - ratio to the floor (geomean): " + "; ".join(floors))
        for n, v in s["impls"].items():
            notes = []
            if v["comparator_checked"] and v["comparator_passed"] < v["comparator_checked"]:
                notes.append(f"comparator failed on {v['comparator_checked'] - v['comparator_passed']} of "
                             f"{v['comparator_checked']} ({', '.join(_short(x) for x in v['comparator_failed'][:5])})")
            for reason, count in v["unsupported"].items():
                notes.append(f"{count} unsupported ({reason.removeprefix('unsupported: ')})")
            if v["errors"]:
                first = next(iter(v["errors"].items()))
                notes.append(f"{len(v['errors'])} error(s), first {_short(first[0])}: {first[1][:160]}")
            if notes:
                lines.append(f"  - {n}: " + "; ".join(notes))
        if scope == "overall":
            for n, st in summary.get("peers_unavailable", {}).items():
                lines.append(f"  - {n} could not run: {st.get('status')}")
    if doc.get("merge_warnings"):
        lines.append("")
        lines += [f"- merge warning: {w}" for w in doc["merge_warnings"]]
    if doc.get("fp8_vs_bf16"):
        g = doc["fp8_vs_bf16"]["goal_kindex"]
        lines += ["", "### fp8 e4m3 KV against bf16 KV (median bf16 / fp8)", "",
                  "| case | KV MB (bf16) | " + " | ".join(("kindex",) + VARIANT_PEERS) + " |",
                  "|---|---:|" + "---:|" * (1 + len(VARIANT_PEERS))]
        for c in doc["fp8_vs_bf16"]["cases"]:
            cells = [f"{c[n]['speedup']:.2f}" if n in c else "—" for n in ("kindex",) + VARIANT_PEERS]
            lines.append(f"| {_short(c['label'])} | {(c['kv_bytes_bf16'] or 0) / 2**20:.1f} | " + " | ".join(cells)
                         + " |")
        verdict = "met" if g["met"] else "NOT met"
        lines.append(f"\nGoal (kindex fp8 >= {g['speedup']}x bf16 on cases >= {g['min_kv_bytes'] >> 20} MB): "
                     f"{verdict}: {g['timed']} of {g['cases']} cases timed, min {g['min'] or 0:.2f}, geomean "
                     f"{g['geomean'] or 0:.2f}; missed {g['missed']}; not timed {g['not_timed']}")
    return "\n".join(lines)


def row_key(row_or_case, variant):
    """A row's identity: its case and its variant (--fp8-vs-bf16 runs each case twice)."""
    return (row_or_case["dataset"], row_or_case["label"], row_or_case.get("uuid"),
            json.dumps(variant, sort_keys=True))


def fp8_vs_bf16(rows):
    """Per case, the bf16 / fp8 median ratio of each implementation that passed the comparator with both caches,
    and the goal for kindex: >= FP8_GOAL["speedup"] on every case with at least FP8_GOAL["min_kv_bytes"] of bf16 KV."""
    pairs = {}
    for r in rows:
        kv = r.get("variant", DEFAULT_VARIANT)["kv_dtype"]
        pairs.setdefault((r["dataset"], r["label"], r.get("uuid")), {})[kv] = r
    cases = []
    for (dataset, label, _), by in pairs.items():
        if "bf16" not in by or "fp8_e4m3" not in by:
            continue
        entry = {"dataset": dataset, "label": label, "kv_bytes_bf16": by["bf16"].get("kv_bytes_bf16")}
        for name in ("kindex",) + VARIANT_PEERS:
            slow, fast = (_median(by[kv], name) if _passed(by[kv], name) else None for kv in ("bf16", "fp8_e4m3"))
            if slow and fast:
                entry[name] = {"bf16_us": slow, "fp8_us": fast, "speedup": slow / fast}
        cases.append(entry)
    big = [c for c in cases if (c["kv_bytes_bf16"] or 0) >= FP8_GOAL["min_kv_bytes"]]
    missing = [c["label"] for c in big if "kindex" not in c]
    missed = [{"label": c["label"], "speedup": c["kindex"]["speedup"]} for c in big
              if "kindex" in c and c["kindex"]["speedup"] < FP8_GOAL["speedup"]]
    speedups = [c["kindex"]["speedup"] for c in big if "kindex" in c]
    goal = dict(FP8_GOAL, cases=len(big), timed=len(speedups), missed=missed, not_timed=missing,
                geomean=db.geomean(speedups) if speedups else None, min=min(speedups) if speedups else None,
                met=bool(big) and not missed and not missing)
    return {"cases": cases, "goal_kindex": goal}


def progress_line(row, n, total):
    if row.get("status") != "done":
        return f"[{n}/{total}] {_short(row['label']):28s} {row.get('status')}: {row.get('error', '')}"
    parts = []
    for c in COLUMNS:
        e = _entry(row, c)
        if not e:
            continue
        if e.get("median_us"):
            verdict = e.get("correctness", {}).get("passed")
            parts.append(f"{c} {e['median_us']:.2f}{'' if verdict in (True, None) else ' FAIL'}")
        else:
            parts.append(f"{c} {str(e.get('status', '-')).split(':')[0]}")
    ratio = row.get("ratio_kindex_vs_best")
    return (f"[{n}/{total}] {_short(row['label']):28s} {row['bytes'] / 1e6:9.2f} MB floor {row['floor_us']:8.2f} us"
            f" | " + ", ".join(parts) + f" | k/best {f'{ratio:.3f}' if ratio else '-'} "
            f"({row.get('best_peer', '-')})")


# ------------------------------------------------------------------------------------------------------------------
# Command line
# ------------------------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", action="append", default=[], metavar="DIR",
                    help="a FlashInfer-Bench-layout dataset folder (kindex catalog export --out DIR); repeatable")
    ap.add_argument("--filter", metavar="REGEX", help='re.search on case labels "<definition>#<index>"')
    ap.add_argument("--impls", default=",".join(DEFAULT_IMPLS),
                    help=f"comma-separated subset of {','.join(IMPLEMENTATIONS)} (default: all but tileops, which "
                         f"runs alone in its own process)")
    ap.add_argument("--out", help="JSON output, rewritten after every case")
    ap.add_argument("--quick", action="store_true", help="3 warm-up + 10 timed calls, 1 extra plan")
    ap.add_argument("--lib", help="libkindex.so (needed when kindex is in --impls)")
    ap.add_argument("--report", nargs="+", metavar="JSON",
                    help="print the markdown table and summary of finished run(s), merged by case; then exit")
    ap.add_argument("--max-cases", type=int, help="run at most N cases (after --filter and --resume)")
    ap.add_argument("--prebuild", action="store_true",
                    help="build FlashInfer's fa2 modules per head_dim and the XQA modules in parallel before the cases")
    ap.add_argument("--plan-repeats", type=int, default=3, help="FlashInfer plan() host timings after the first")
    db.run_args(ap, spin_us=200.0, seed=1, seed_help="inputs' seed (with the case label)",
                spin_help="GPU spin ahead of each timed call; it must outlast the host's enqueue (launch_covered)")
    ap.add_argument("--ref-budget-mb", type=int, default=256,
                    help="the reference's gathered fp32 K per step, MiB (its peak is ~5 x)")
    variant = ap.add_argument_group("decode variant (kindex and flashinfer_tc / flashinfer_cuda only)")
    variant.add_argument("--kv-dtype", choices=sorted(KV_DTYPES), default="bf16",
                         help="the KV cache's dtype (fp8: the drawn bf16 values converted)")
    variant.add_argument("--layout", choices=("NHD", "HND"), default="NHD")
    variant.add_argument("--q-len", type=int, default=1, help="query tokens per request (q_len_per_req)")
    variant.add_argument("--window", type=int, default=-1, help="window_left (-1: none)")
    variant.add_argument("--soft-cap", type=float, default=0.0, help="logits_soft_cap (0: none)")
    variant.add_argument("--sinks", action="store_true", help="attention sinks, drawn per case")
    variant.add_argument("--rope", action="store_true", help="pos_encoding_mode ROPE_LLAMA")
    variant.add_argument("--rope-scale", type=float, default=1.0, help="with --rope: rope_scale (FlashInfer's default 1)")
    variant.add_argument("--rope-theta", type=float, default=1e4,
                         help="with --rope: rope_theta (FlashInfer's default 1e4; Llama 3: 5e5)")
    variant.add_argument("--k-scale", type=float, default=1.0)
    variant.add_argument("--v-scale", type=float, default=1.0)
    variant.add_argument("--fp8-vs-bf16", action="store_true",
                         help="each case with bf16 KV, then fp8 e4m3 KV (other variant options kept); the goal: fp8 "
                              f">= {FP8_GOAL['speedup']}x faster from {FP8_GOAL['min_kv_bytes'] >> 20} MB of KV")
    args = ap.parse_args(argv)
    if args.report:
        return args
    if not args.dataset:
        ap.error("--dataset DIR required (or --report JSON ...)")
    if not args.out:
        ap.error("--out required")
    args.impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    unknown = [s for s in args.impls if s not in IMPLEMENTATIONS]
    if unknown:
        ap.error(f"--impls: unknown {', '.join(unknown)} (known: {', '.join(IMPLEMENTATIONS)})")
    if "tileops" in args.impls and any(n.startswith("flashinfer") for n in args.impls):
        ap.error("--impls: tileops cannot share a process with FlashInfer (their tvm-ffi versions conflict): run "
                 "--impls tileops in its own invocation with its own --out, then --report both files")
    if "kindex" in args.impls and not args.lib:
        ap.error("--lib libkindex.so required with kindex in --impls")
    args.variant = variant_of(args)
    if args.fp8_vs_bf16 and args.kv_dtype != "bf16":
        ap.error("--fp8-vs-bf16 runs bf16 and fp8_e4m3 itself: leave --kv-dtype out")
    if args.fp8_vs_bf16 or not is_default(args.variant):
        others = [n for n in args.impls if n != "kindex" and n not in VARIANT_PEERS]
        if others:
            ap.error(f"--impls: {', '.join(others)} take no variant arguments: use kindex, "
                     f"{', '.join(VARIANT_PEERS)} with --kv-dtype / --layout / --q-len / --window / --soft-cap / "
                     "--sinks / --rope / --k-scale / --v-scale / --fp8-vs-bf16")
    if not 1 <= args.q_len <= 8 or args.window < -1 or args.soft_cap < 0 or min(args.k_scale, args.v_scale) <= 0:
        ap.error(f"a variant option out of range: --q-len {args.q_len} (1..8), --window {args.window} (>= -1), "
                 f"--soft-cap {args.soft_cap} (>= 0), --k-scale {args.k_scale} / --v-scale {args.v_scale} (> 0)")
    if not (math.isfinite(args.rope_scale) and args.rope_scale > 0 and math.isfinite(args.rope_theta)
            and args.rope_theta > 0):
        ap.error(f"--rope-scale {args.rope_scale} / --rope-theta {args.rope_theta}: must be finite and > 0")
    if not args.rope and (args.rope_scale, args.rope_theta) != (1.0, 1e4):
        ap.error("--rope-scale / --rope-theta apply to RoPE: add --rope")
    if args.quick:
        args.warmup, args.iters, args.plan_repeats = 3, 10, 1
    if args.iters < 1:
        ap.error("--iters must be >= 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        docs = [json.loads(pathlib.Path(p).read_text()) for p in args.report]
        doc = merge(docs) if len(docs) > 1 else docs[0]
        if len(docs) == 1:
            for r in doc.get("cases", []):
                derive(r)
            doc["summary"] = summarize(doc.get("cases", []), doc.get("implementations"))
            if doc.get("fp8_vs_bf16_mode"):
                doc["fp8_vs_bf16"] = fp8_vs_bf16(doc.get("cases", []))
        print(report(doc))
        return 0
    try:  # every dataset file and safetensors header is checked before the GPU is touched
        datasets = load_datasets(args.dataset)
    except (DatasetError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    cases = select_cases([c for ds in datasets for c in ds["cases"]], args.filter)
    if not cases:
        print(f"error: no case matches --filter {args.filter!r}", file=sys.stderr)
        return 1

    torch = db.cuda_torch()
    if torch is None:
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference's einsums in true fp32
    ctx = Context(args)
    for name in args.impls:
        print(f"{name}: {ctx.status[name]}", flush=True)
    timer = db.DeviceTimer(spin_us=args.spin_us)
    copy = db.measure_copy_rate()
    variants = [args.variant]
    if args.fp8_vs_bf16:
        variants = [dict(args.variant, kv_dtype=kv) for kv in ("bf16", "fp8_e4m3")]
    doc = {"benchmark": "decode_suite", "schema": SCHEMA, "command": " ".join([sys.executable] + sys.argv),
           "variant": args.variant, "fp8_vs_bf16_mode": args.fp8_vs_bf16,
           "date_utc": db.now_utc(), "device": db.device_info(), "seed": args.seed,
           "impls_requested": args.impls,
           "implementations": {n: dict(ctx.meta.get(n.split("_")[0] if n.startswith("flashinfer") else n, {}),
                                       status=ctx.status[n]) for n in args.impls},
           "datasets": [{"name": ds["name"], "path": ds["path"], "definitions": ds["definitions"],
                         "workloads": len(ds["cases"]), "skipped_definitions": ds["skipped_definitions"]}
                        for ds in datasets],
           "filter": args.filter,
           "protocol": dict(timer.protocol(), warmup=args.warmup, iterations=args.iters, quick=args.quick,
                            plan_repeats=args.plan_repeats,
                            order="per case: " + ", ".join(args.impls) + "; each set up, checked, then timed as "
                                  "one block"),
           "copy_rate": copy,
           "floor": {"bytes": "distinct KV rows referenced (K and V) + q + output + lse",
                     "bandwidth_bytes_per_s": copy["bytes_per_s"]},
           "correctness": dict(FIB_TOLERANCE, rule="flashinfer-bench",
                               against="fp32 reference (reference_decode) on the GPU, output rounded to bf16, lse "
                                       "base 2; lse checked where the implementation returns it"),
           "reference": {"budget_bytes": args.ref_budget_mb << 20, "tf32": False},
           "cases": [], "summary": {}}
    if args.prebuild:
        doc["prebuild"] = prebuild(ctx, cases, args.impls, args.variant)
    done = {}
    if args.resume:
        kept = db.resume_rows(doc, args.out, "cases", keep=lambda r: r.get("status") == "done"
                              or str(r.get("status", "")).startswith("skipped"))
        done = {row_key(r, r.get("variant", DEFAULT_VARIANT)) for r in kept}
    todo = [c for c in cases if any(row_key(c, v) not in done for v in variants)]
    todo = select_cases(todo, None, args.max_cases)
    print(f"copy rate {copy['bytes_per_s'] / 1e12:.3f} TB/s; spin {args.spin_us} us = {timer.spin_cycles} cycles; "
          f"{len(todo)} case(s) to run of {len(cases)} selected", flush=True)
    rc = 0
    runs = [(case, v) for case in todo for v in variants if row_key(case, v) not in done]
    for n, (case, args.variant) in enumerate(runs, 1):
        try:
            row = run_case(ctx, case, args, timer, copy["bytes_per_s"])
        except Exception as e:  # noqa: BLE001 -- the reference or the inputs failed, or the context broke
            traceback.print_exc()
            if isinstance(e, BrokenContext) or not cuda_alive(torch):
                print(f"error: the CUDA context broke: {e}; stopping (rerun with --resume)", flush=True)
                doc["stopped"] = f"{case['label']}: {type(e).__name__}: {e}"
                rc = 1
                break
            row = {k: case[k] for k in ("dataset", "definition", "index", "label", "uuid")}
            row.update(status="error", error=f"{type(e).__name__}: {e}", impls={})
        doc["cases"].append(row)
        doc["summary"] = summarize(doc["cases"], doc["implementations"])
        if args.fp8_vs_bf16:
            doc["fp8_vs_bf16"] = fp8_vs_bf16(doc["cases"])
        db.write_json(args.out, doc)
        print(progress_line(row, n, len(runs)), flush=True)
        if row.get("status") == "error":
            rc = 1
        for name, e in row.get("impls", {}).items():
            if str(e.get("status", "")).startswith("error"):
                print(f"  ERROR {name}: {e.get('error')}", flush=True)
                rc = 1
            elif str(e.get("status", "")).startswith("unsupported"):
                print(f"  {name} {e['status']}", flush=True)
            if e.get("correctness", {}).get("passed") is False:
                print(f"  COMPARATOR FAIL {name}: {e['correctness']['reason']}", flush=True)
                rc = rc or 3
    doc["summary"] = summarize(doc["cases"], doc["implementations"])
    if args.fp8_vs_bf16:
        doc["fp8_vs_bf16"] = fp8_vs_bf16(doc["cases"])
    db.write_and_report(args.out, doc, report)
    return rc


if __name__ == "__main__":
    db.run_main(main)
