"""kindex's kernels as torch custom ops (torch.library), so torch.compile sees them as opaque calls and CUDA
graph capture records their kernels.

Each op validates its arguments (kindex._checks, also run by the fake implementation at trace time), enqueues
the kernel on the current CUDA stream of the tensors' device through libkindex's C ABI and returns: no host
synchronisation, no device-to-host copy. Scratch memory comes from a workspace cached per (device, stream).
The public paged decode functions take a shorter path for plain eager calls (_eager): same checks, same launch,
without the dispatcher.
"""

import math
import threading
import types
from typing import Optional, Tuple

import torch

from . import _capi, _checks
from ._checks import (DECODE_FP8_KV_FORMATS, check_gqa_rope_backward, check_paged_decode, check_scale,
                      gqa_rope_backward_shapes)
from ._capi import GQA_ROPE_BACKWARD_INPUTS, GQA_ROPE_BACKWARD_OUTPUTS

_DTYPES = {torch.bfloat16: _capi.DTYPE_BF16, torch.float16: _capi.DTYPE_FP16}


class _Workspaces:
    """Device scratch per (device, stream), grown to the largest size asked for.

    A workspace that is outgrown is kept, not freed: a CUDA graph captured with it still writes there when it
    is replayed. Growth doubles, so what is kept is at most twice the largest size. Allocation goes through
    torch's caching allocator, so a workspace first needed during graph capture comes from the graph's pool.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._current = {}  # (device index, stream) -> uint8 tensor
        self._outgrown = []

    def get(self, device: torch.device, stream: int, nbytes: int) -> torch.Tensor:
        key = (device.index, stream)
        with self._lock:
            ws = self._current.get(key)
            if ws is None or ws.numel() < nbytes:
                if ws is not None:
                    self._outgrown.append(ws)
                size = max(nbytes, 2 * ws.numel() if ws is not None else 0, 1 << 20)
                ws = torch.empty(size, dtype=torch.uint8, device=device)
                self._current[key] = ws
            return ws


workspaces = _Workspaces()


def _eager(*tensors) -> bool:
    """Plain tensors outside tracing: the public decode functions then launch directly instead of through the
    dispatcher, whose Python custom-op path costs host time per call that a decode of microseconds would show
    wherever it is timed from the host (as FlashInfer-Bench does). Under torch.compile, torch.export, fake or meta
    tensors and tensor subclasses the registered ops run."""
    if torch.compiler.is_compiling() or getattr(tensors[0], "is_meta", False):
        return False
    for t in tensors:  # (a non-tensor stays here: the direct path's checks name it)
        if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:
            return False
    return True


_workspace_sizes = {}  # (name, device index, the params' sizes) -> bytes: a dict lookup instead of a plan per call


def _run(name: str, params, size_key: tuple, device: torch.device, workspace: Optional[torch.Tensor] = None,
         size_name: Optional[str] = None):
    """Launches kindex_<name> on the device's current stream with a workspace sized for `params` (size_key: the
    params fields the size depends on; size_name: the kindex_<size_name>_workspace_size that sizes it, default
    name). A caller's `workspace` (the decode wrapper's buffer) is used when given; too small, the C ABI says so,
    naming it."""
    switch = device.index != torch.cuda.current_device()
    if switch:
        previous = torch.cuda.current_device()
        torch.cuda.set_device(device)
    try:
        size_name = size_name or name
        key = (size_name, device.index) + size_key
        nbytes = _workspace_sizes.get(key)
        if nbytes is None:
            if len(_workspace_sizes) >= 4096:  # bounded: a server sees ever new batch sizes and lengths
                _workspace_sizes.clear()
            nbytes = _workspace_sizes[key] = _capi.workspace_size(size_name, params)
        stream = torch.cuda.current_stream(device).cuda_stream
        if workspace is None and nbytes:
            workspace = workspaces.get(device, stream, nbytes)
        if workspace is None:
            _capi.launch(name, params, 0, 0, stream)
        else:
            _capi.launch(name, params, workspace.data_ptr(), workspace.numel() * workspace.element_size(), stream)
    finally:
        if switch:
            torch.cuda.set_device(previous)


def _ensure_cuda_library(fn: str) -> None:
    if not _capi.has_cuda():
        raise _capi.KindexError(2, f"{fn}: this libkindex ({_capi.library_path()}) was built without CUDA "
                                   f"(version {_capi.version()}); install kindex on a machine with nvcc, or set "
                                   f"{_capi.LIBRARY_ENV} to a CUDA build")


# --- paged decode ---------------------------------------------------------------------------------------------
# The C ABI's version-2 fields (kindex.h) every decode op takes after its other arguments, in this order, with the
# defaults of KINDEX_PAGED_DECODE_PARAMS_INIT (read from the ctypes mirror, which the CPU tests hold to the header).
VARIANT_FIELDS = ("kv_layout", "k_scale", "v_scale", "q_len_per_req", "window_left", "logits_soft_cap", "sinks",
                  "pos_encoding", "rope_scale", "rope_theta")
_VARIANT_TYPES = {"kv_layout": "int", "q_len_per_req": "int", "window_left": "int", "pos_encoding": "int",
                  "sinks": "Tensor?"}  # the rest: float
_INIT = _capi.PagedDecodeParams()
DEFAULT_VARIANT = types.MappingProxyType({f: getattr(_INIT, f) for f in VARIANT_FIELDS})
_VARIANT_SCHEMA = ", ".join(f"{_VARIANT_TYPES.get(f, 'float')} {f}={DEFAULT_VARIANT[f]!r}" for f in VARIANT_FIELDS)
# torch's fp8 dtypes -> kindex_kv_format (a cache in q's dtype is KV_FORMAT_SAME_AS_Q)
FP8_KV_FORMATS = {getattr(torch, name): fmt for name, fmt in DECODE_FP8_KV_FORMATS.items()
                  if hasattr(torch, name)}


def _variant(args: tuple) -> dict:
    """An op's trailing variant arguments by field name (the dispatcher passes only those given)."""
    return dict(zip(VARIANT_FIELDS, tuple(args) + tuple(DEFAULT_VARIANT[f] for f in VARIANT_FIELDS[len(args):])))


def decode_variant(fn: str, kv_layout="NHD", k_scale=None, v_scale=None, q_len_per_req=1, window_left=-1,
                   logits_soft_cap=None, sinks=None, pos_encoding_mode="NONE", rope_scale=None,
                   rope_theta=None) -> dict:
    """FlashInfer's options as the ops' variant fields (checked; kindex._checks.decode_variant). The common call,
    every option at its default, costs a comparison."""
    if (kv_layout == "NHD" and k_scale is None and v_scale is None and q_len_per_req == 1 and window_left == -1
            and logits_soft_cap is None and sinks is None and pos_encoding_mode == "NONE" and rope_scale is None
            and rope_theta is None):
        return DEFAULT_VARIANT
    variant = _checks.decode_variant(fn, kv_layout, k_scale, v_scale, q_len_per_req, window_left, logits_soft_cap,
                                     pos_encoding_mode, rope_scale, rope_theta)
    variant["sinks"] = sinks
    return variant


def _decode_sizes_fast(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, variant):
    """check_paged_decode's sizes when every check passes, read with as few attribute lookups as possible; None
    when anything is off (then check_paged_decode says what)."""
    try:
        dtype = q.dtype
        kv_dtype = k_cache.dtype
        if (dtype not in _DTYPES or v_cache.dtype != kv_dtype
                or (kv_dtype != dtype and kv_dtype not in FP8_KV_FORMATS)):
            return None
        rows, qo_heads, head_dim = q.shape
        q_len = variant["q_len_per_req"]
        batch = rows // q_len
        k_shape = k_cache.shape
        if variant["kv_layout"] == _capi.KV_LAYOUT_NHD:
            num_pages, page_size, kv_heads, k_dim = k_shape
        else:
            num_pages, kv_heads, page_size, k_dim = k_shape
        (num_indices,) = kv_indices.shape
        if (v_cache.shape != k_shape or k_dim != head_dim or head_dim not in (64, 128, 256) or rows % q_len
                or not 1 <= page_size <= 128 or kv_heads < 1 or qo_heads % kv_heads
                or qo_heads > 16 * kv_heads or kv_indptr.shape != (batch + 1,)
                or kv_indptr.dtype != torch.int32 or kv_indices.dtype != torch.int32):
            return None
        device = q.device
        if device.type != "cuda":
            return None
        tensors = [q, k_cache, v_cache, kv_indptr, kv_indices]
        if kv_last_page_len is not None:
            if kv_last_page_len.shape != (batch,) or kv_last_page_len.dtype != torch.int32:
                return None
            tensors.append(kv_last_page_len)
        if out is not None:
            if out.shape != q.shape or out.dtype != dtype:
                return None
            tensors.append(out)
        if lse is not None:
            if lse.shape != (rows, qo_heads) or lse.dtype != torch.float32:
                return None
            tensors.append(lse)
        sinks = variant["sinks"]
        if sinks is not None:
            if sinks.shape != (qo_heads,) or sinks.dtype != torch.float32:
                return None
            tensors.append(sinks)
        for t in tensors:
            if not t.is_contiguous() or t.device != device:
                return None
    except (ValueError, TypeError, AttributeError):  # a wrong rank or a non-tensor
        return None
    return dict(batch_size=batch, num_qo_heads=qo_heads, num_kv_heads=kv_heads, head_dim=head_dim,
                page_size=page_size, num_pages=num_pages, num_kv_indices=num_indices,
                kv_format=FP8_KV_FORMATS.get(kv_dtype, _capi.KV_FORMAT_SAME_AS_Q))


def _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, variant, fn, meta=False):
    sizes = None if meta else _decode_sizes_fast(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len,
                                                 out, lse, variant)
    if sizes is None:  # raises, naming the argument (or, meta, checks fake tensors)
        sizes = check_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, fn=fn,
                                   meta=meta, sinks=variant["sinks"], kv_layout=variant["kv_layout"],
                                   q_len_per_req=variant["q_len_per_req"])
    return sizes


def _ptr(t: Optional[torch.Tensor]):
    return t.data_ptr() if t is not None else None


_SCALAR_FIELDS = tuple(f for f in VARIANT_FIELDS if f != "sinks")
_DEFAULT_SCALARS = tuple(DEFAULT_VARIANT[f] for f in _SCALAR_FIELDS)


def decode_params(sizes: dict, variant, dtype: torch.dtype, sm_scale: float, **tensors) -> "_capi.PagedDecodeParams":
    """kindex_paged_decode_params: the checked sizes, the variant fields and the tensors' pointers (by field name,
    None for NULL). The struct holds raw pointers: the caller keeps the tensors alive while it is used."""
    fields = {f: _ptr(t) for f, t in tensors.items()}
    if variant is not DEFAULT_VARIANT:  # (the struct's own defaults otherwise: the common call stays short)
        fields.update({f: variant[f] for f in _SCALAR_FIELDS}, sinks=_ptr(variant["sinks"]))
    return _capi.PagedDecodeParams(dtype=_DTYPES[dtype], sm_scale=sm_scale, **fields, **sizes)


def _decode_size_key(dtype: torch.dtype, sizes: dict, variant) -> tuple:
    """What the workspace size may depend on: the sizes, the dtype and the variant's scalars (not the pointers)."""
    scalars = _DEFAULT_SCALARS if variant is DEFAULT_VARIANT else tuple(variant[f] for f in _SCALAR_FIELDS)
    return (dtype, *sizes.values(), *scalars, variant["sinks"] is not None)


def _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse, variant,
                         workspace=None, fn="kindex.paged_decode", sizes=None, entry="paged_decode"):
    """Checks (unless the caller did: `sizes`), then launches kindex_<entry> (paged_decode: plan and run;
    paged_decode_run: run on the plan already in `workspace`); out and lse must exist."""
    if sizes is None:
        sizes = _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, variant, fn)
    _ensure_cuda_library(fn)
    params = decode_params(sizes, variant, q.dtype, sm_scale, q=q, k_cache=k_cache, v_cache=v_cache,
                           kv_indptr=kv_indptr, kv_indices=kv_indices, kv_last_page_len=kv_last_page_len,
                           output=out, lse=lse)
    _run(entry, params, _decode_size_key(q.dtype, sizes, variant), q.device, workspace, size_name="paged_decode")


def _launch_paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype: torch.dtype, num_qo_heads: int,
                              num_kv_heads: int, head_dim: int, page_size: int, workspace: torch.Tensor,
                              kv_format: int, variant: dict) -> None:
    """The device plan of a batch step into `workspace` (it reads only the page table, the sizes and the variant)."""
    fn = "kindex.BatchDecodeWithPagedKVCacheWrapper.plan"
    _ensure_cuda_library(fn)
    sizes = dict(batch_size=kv_indptr.shape[0] - 1, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads,
                 head_dim=head_dim, page_size=page_size, num_pages=1,  # num_pages: not read by the plan
                 num_kv_indices=kv_indices.shape[0], kv_format=kv_format)
    params = decode_params(sizes, variant, dtype, 1.0, kv_indptr=kv_indptr, kv_indices=kv_indices,
                           kv_last_page_len=kv_last_page_len)
    _run("paged_decode_plan", params, _decode_size_key(dtype, sizes, variant), kv_indptr.device, workspace,
         size_name="paged_decode")


@torch.library.custom_op("kindex::paged_decode_plan", mutates_args=("workspace",), schema=(
    "(Tensor kv_indptr, Tensor kv_indices, Tensor? kv_last_page_len, ScalarType dtype, int num_qo_heads, "
    f"int num_kv_heads, int head_dim, int page_size, Tensor(a!) workspace, int kv_format=0, {_VARIANT_SCHEMA}) -> ()"))
def _paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads, head_dim,
                       page_size, workspace, kv_format=0, *variant):
    _launch_paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads, head_dim,
                              page_size, workspace, kv_format, _variant(variant))


@_paged_decode_plan.register_fake
def _(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads, head_dim, page_size, workspace,
      kv_format=0, *variant):
    return None


def paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype: torch.dtype, num_qo_heads: int,
                      num_kv_heads: int, head_dim: int, page_size: int, workspace: torch.Tensor,
                      kv_format: int = _capi.KV_FORMAT_SAME_AS_Q, variant: dict = DEFAULT_VARIANT) -> None:
    """Writes the device plan of this page table into `workspace` (the decode wrapper's plan())."""
    if _eager(kv_indptr, kv_indices, kv_last_page_len, workspace):
        _launch_paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads,
                                  head_dim, page_size, workspace, kv_format, variant)
    else:
        _paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads, head_dim,
                           page_size, workspace, kv_format, *(variant[f] for f in VARIANT_FIELDS))


_DECODE_INPUTS = "Tensor q, Tensor k_cache, Tensor v_cache, Tensor kv_indptr, Tensor kv_indices, " \
                 "Tensor? kv_last_page_len, float sm_scale"


@torch.library.custom_op("kindex::paged_decode", mutates_args=(),
                         schema=f"({_DECODE_INPUTS}, {_VARIANT_SCHEMA}) -> (Tensor, Tensor)")
def _paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, *variant):
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
    _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                         _variant(variant))
    return out, lse


@_paged_decode.register_fake
def _(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, *variant):
    _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, None, None, _variant(variant),
                  "kindex.paged_decode", meta=True)
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)


# Destination passing: out and lse written in place; workspace (the decode wrapper's buffer) or None for the
# cached one.
@torch.library.custom_op("kindex::paged_decode_out", mutates_args=("out", "lse", "workspace"), schema=(
    f"({_DECODE_INPUTS}, Tensor(a!) out, Tensor(b!)? lse, Tensor(c!)? workspace, {_VARIANT_SCHEMA}) -> ()"))
def _paged_decode_out(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse, workspace,
                      *variant):
    _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                         _variant(variant), workspace)


@_paged_decode_out.register_fake
def _(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse, workspace, *variant):
    _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, _variant(variant),
                  "kindex.paged_decode", meta=True)


_RUN_FN = "kindex.BatchDecodeWithPagedKVCacheWrapper.run"


# The run alone, on the plan paged_decode_plan wrote into `workspace` (the decode wrapper's run()).
@torch.library.custom_op("kindex::paged_decode_run_out", mutates_args=("out", "lse"), schema=(
    f"({_DECODE_INPUTS}, Tensor(a!) out, Tensor(b!)? lse, Tensor workspace, {_VARIANT_SCHEMA}) -> ()"))
def _paged_decode_run_out(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                          workspace, *variant):
    _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                         _variant(variant), workspace, fn=_RUN_FN, entry="paged_decode_run")


@_paged_decode_run_out.register_fake
def _(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse, workspace, *variant):
    _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, _variant(variant), _RUN_FN,
                  meta=True)


def paged_decode_run_into(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale: float, out, lse,
                          workspace, variant: dict = DEFAULT_VARIANT) -> None:
    """The run on a plan in `workspace`, destination passing: for callers that own out, lse and the workspace and
    planned into it (the decode wrapper)."""
    if _eager(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, workspace, variant["sinks"]):
        _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                             variant, workspace, fn=_RUN_FN, entry="paged_decode_run")
    else:
        _paged_decode_run_out(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                              workspace, *(variant[f] for f in VARIANT_FIELDS))


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor,
                 kv_indices: torch.Tensor, kv_last_page_len: Optional[torch.Tensor] = None,
                 sm_scale: Optional[float] = None, out: Optional[torch.Tensor] = None,
                 lse: Optional[torch.Tensor] = None, *, kv_layout: str = "NHD", k_scale: Optional[float] = None,
                 v_scale: Optional[float] = None, q_len_per_req: int = 1, window_left: int = -1,
                 logits_soft_cap: Optional[float] = None, sinks: Optional[torch.Tensor] = None,
                 pos_encoding_mode: str = "NONE", rope_scale: Optional[float] = None,
                 rope_theta: Optional[float] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Batched GQA decode over a paged KV cache (FlashInfer-Bench gqa_paged_decode_*).

    q [batch_size, num_qo_heads, head_dim] bf16/fp16; k_cache, v_cache [num_pages, page_size, num_kv_heads,
    head_dim] (NHD) of q's dtype; kv_indptr [batch_size + 1], kv_indices [num_kv_indices] (== kv_indptr[-1]),
    kv_last_page_len [batch_size] (None: every last page is full), all int32; sm_scale defaults to
    1/sqrt(head_dim). Returns (output, lse): output like q, lse [batch_size, num_qo_heads] fp32, the base-2
    log-sum-exp of sm_scale * q.k (the definitions' and FlashInfer's convention). `out` / `lse`, when given,
    are written in place and returned. All tensors on one CUDA device, contiguous.

    FlashInfer's decode variants, with its names and semantics (kindex.h): kv_layout "NHD" or "HND"
    ([num_pages, num_kv_heads, page_size, head_dim]); k_cache / v_cache in torch.float8_e4m3fn or float8_e5m2
    (k = k_scale * value, v = v_scale * value; the scales apply to any cache dtype, default 1); q_len_per_req
    (1..8) query tokens per request, q [batch_size * q_len_per_req, ...], causal among them; window_left (-1: no
    window); logits_soft_cap (None or 0: off); sinks [num_qo_heads] fp32; pos_encoding_mode "NONE" or
    "ROPE_LLAMA" with rope_scale (default 1) and rope_theta (default 1e4). What the kernels do not run yet, the
    library refuses (KindexError naming the field).
    """
    fn = "kindex.paged_decode"
    if sm_scale is None:  # (a q without a head_dim is reported by the checks, not here)
        sm_scale = 1.0 / math.sqrt(q.shape[-1]) if hasattr(q, "shape") and len(q.shape) else 1.0
    if type(sm_scale) is float and math.isfinite(sm_scale):
        scale = sm_scale
    else:
        scale = check_scale(fn, "sm_scale", sm_scale)
    variant = decode_variant(fn, kv_layout, k_scale, v_scale, q_len_per_req, window_left, logits_soft_cap, sinks,
                             pos_encoding_mode, rope_scale, rope_theta)
    if _eager(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, sinks):
        # Checked before anything is allocated, so a bad argument is reported as such.
        sizes = _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, variant, fn)
        if out is None:
            out = torch.empty_like(q)
        if lse is None:
            lse = torch.empty(tuple(q.shape[:2]), dtype=torch.float32, device=q.device)
        _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, scale, out, lse, variant,
                             sizes=sizes)
        return out, lse
    tail = tuple(variant[f] for f in VARIANT_FIELDS)
    if out is None and lse is None:
        return _paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, scale, *tail)
    if out is None:
        out = torch.empty_like(q)
    if lse is None:
        lse = torch.empty(tuple(q.shape[:2]), dtype=torch.float32, device=q.device)
    _paged_decode_out(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, scale, out, lse, None, *tail)
    return out, lse



@torch.library.custom_op("kindex::gqa_rope_backward", mutates_args=())
def _gqa_rope_backward(grad_output: torch.Tensor, hidden_states: torch.Tensor, cos: torch.Tensor,
                       sin: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, v_weight: torch.Tensor,
                       o_weight: torch.Tensor, query_states: torch.Tensor, key_states: torch.Tensor,
                       value_states: torch.Tensor, attn_weights: torch.Tensor, attn_output: torch.Tensor,
                       scaling: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                                torch.Tensor]:
    inputs = dict(zip(GQA_ROPE_BACKWARD_INPUTS, (grad_output, hidden_states, cos, sin, q_weight, k_weight,
                                                 v_weight, o_weight, query_states, key_states, value_states,
                                                 attn_weights, attn_output)))
    batch_size, seq_len = check_gqa_rope_backward(inputs)
    _ensure_cuda_library("kindex.gqa_rope_backward")
    shapes = gqa_rope_backward_shapes(batch_size, seq_len)
    outputs = {name: hidden_states.new_empty(shapes[name]) for name in GQA_ROPE_BACKWARD_OUTPUTS}
    params = _capi.GqaRopeBackwardParams(
        batch_size=batch_size, seq_len=seq_len, scaling=scaling,
        **{name: t.data_ptr() for name, t in inputs.items()},
        **{name: t.data_ptr() for name, t in outputs.items()})
    _run("gqa_rope_backward", params, (batch_size, seq_len), hidden_states.device)
    return tuple(outputs[name] for name in GQA_ROPE_BACKWARD_OUTPUTS)


@_gqa_rope_backward.register_fake
def _(grad_output, hidden_states, cos, sin, q_weight, k_weight, v_weight, o_weight, query_states, key_states,
      value_states, attn_weights, attn_output, scaling):
    inputs = dict(zip(GQA_ROPE_BACKWARD_INPUTS, (grad_output, hidden_states, cos, sin, q_weight, k_weight,
                                                 v_weight, o_weight, query_states, key_states, value_states,
                                                 attn_weights, attn_output)))
    batch_size, seq_len = check_gqa_rope_backward(inputs, meta=True)
    shapes = gqa_rope_backward_shapes(batch_size, seq_len)
    return tuple(hidden_states.new_empty(shapes[name]) for name in GQA_ROPE_BACKWARD_OUTPUTS)


def gqa_rope_backward(grad_output: torch.Tensor, hidden_states: torch.Tensor, cos: torch.Tensor,
                      sin: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, v_weight: torch.Tensor,
                      o_weight: torch.Tensor, query_states: torch.Tensor, key_states: torch.Tensor,
                      value_states: torch.Tensor, attn_weights: torch.Tensor, attn_output: torch.Tensor,
                      scaling: Optional[float] = None):
    """The backward of a GQA attention layer with RoPE (SOL-ExecBench L2/003): its 13 tensor inputs and the
    scaling, by their definition names, bf16, contiguous, on one CUDA device (hidden 5120, 32 query heads,
    8 KV heads, head_dim 128; key_states / value_states after repeat_kv). scaling defaults to 1/sqrt(128).
    Returns (grad_hidden_states, grad_q_weight, grad_k_weight, grad_v_weight, grad_o_weight), bf16."""
    if scaling is None:
        scaling = 1.0 / math.sqrt(128)
    scale = check_scale("kindex.gqa_rope_backward", "scaling", scaling)
    return _gqa_rope_backward(grad_output, hidden_states, cos, sin, q_weight, k_weight, v_weight, o_weight,
                              query_states, key_states, value_states, attn_weights, attn_output, scale)


__all__ = ["paged_decode", "gqa_rope_backward"]
