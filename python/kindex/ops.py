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
from typing import Optional, Tuple

import torch

from . import _capi
from ._checks import check_gqa_rope_backward, check_paged_decode, check_scale, gqa_rope_backward_shapes
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


def _decode_sizes_fast(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse):
    """check_paged_decode's sizes when every check passes, read with as few attribute lookups as possible; None
    when anything is off (then check_paged_decode says what)."""
    try:
        dtype = q.dtype
        if dtype not in _DTYPES or k_cache.dtype != dtype or v_cache.dtype != dtype:
            return None
        batch, qo_heads, head_dim = q.shape
        k_shape = k_cache.shape
        num_pages, page_size, kv_heads, k_dim = k_shape
        (num_indices,) = kv_indices.shape
        if (v_cache.shape != k_shape or k_dim != head_dim or head_dim not in (64, 128, 256)
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
            if lse.shape != (batch, qo_heads) or lse.dtype != torch.float32:
                return None
            tensors.append(lse)
        for t in tensors:
            if not t.is_contiguous() or t.device != device:
                return None
    except (ValueError, TypeError, AttributeError):  # a wrong rank or a non-tensor
        return None
    return dict(batch_size=batch, num_qo_heads=qo_heads, num_kv_heads=kv_heads, head_dim=head_dim,
                page_size=page_size, num_pages=num_pages, num_kv_indices=num_indices)


def _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, fn):
    sizes = _decode_sizes_fast(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse)
    if sizes is None:  # raises, naming the argument
        sizes = check_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, fn=fn)
    return sizes


def _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                         workspace=None, fn="kindex.paged_decode", sizes=None, entry="paged_decode"):
    """Checks (unless the caller did: `sizes`), then launches kindex_<entry> (paged_decode: plan and run;
    paged_decode_run: run on the plan already in `workspace`); out and lse must exist."""
    if sizes is None:
        sizes = _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, fn)
    _ensure_cuda_library(fn)
    dtype = _DTYPES[q.dtype]
    params = _capi.PagedDecodeParams(
        dtype=dtype, sm_scale=sm_scale,
        q=q.data_ptr(), k_cache=k_cache.data_ptr(), v_cache=v_cache.data_ptr(),
        kv_indptr=kv_indptr.data_ptr(), kv_indices=kv_indices.data_ptr(),
        kv_last_page_len=kv_last_page_len.data_ptr() if kv_last_page_len is not None else None,
        output=out.data_ptr(), lse=lse.data_ptr() if lse is not None else None, **sizes)
    # The workspace size depends on the sizes and dtype only (kindex.h), not on the pointers.
    size_key = (dtype, sizes["batch_size"], sizes["num_qo_heads"], sizes["num_kv_heads"], sizes["head_dim"],
                sizes["page_size"], sizes["num_kv_indices"])
    _run(entry, params, size_key, q.device, workspace, size_name="paged_decode")


def _launch_paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype: torch.dtype, num_qo_heads: int,
                              num_kv_heads: int, head_dim: int, page_size: int, workspace: torch.Tensor) -> None:
    """The device plan of a batch step into `workspace` (it reads only the page table and the sizes)."""
    fn = "kindex.BatchDecodeWithPagedKVCacheWrapper.plan"
    _ensure_cuda_library(fn)
    batch = kv_indptr.shape[0] - 1
    sizes = dict(batch_size=batch, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                 page_size=page_size, num_pages=1, num_kv_indices=kv_indices.shape[0])  # num_pages: not read
    params = _capi.PagedDecodeParams(
        dtype=_DTYPES[dtype], sm_scale=1.0, kv_indptr=kv_indptr.data_ptr(), kv_indices=kv_indices.data_ptr(),
        kv_last_page_len=kv_last_page_len.data_ptr() if kv_last_page_len is not None else None, **sizes)
    size_key = (_DTYPES[dtype], batch, num_qo_heads, num_kv_heads, head_dim, page_size, sizes["num_kv_indices"])
    _run("paged_decode_plan", params, size_key, kv_indptr.device, workspace, size_name="paged_decode")


@torch.library.custom_op("kindex::paged_decode_plan", mutates_args=("workspace",))
def _paged_decode_plan(kv_indptr: torch.Tensor, kv_indices: torch.Tensor, kv_last_page_len: Optional[torch.Tensor],
                       dtype: torch.dtype, num_qo_heads: int, num_kv_heads: int, head_dim: int, page_size: int,
                       workspace: torch.Tensor) -> None:
    _launch_paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads, head_dim,
                              page_size, workspace)


@_paged_decode_plan.register_fake
def _(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads, head_dim, page_size, workspace):
    return None


def paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype: torch.dtype, num_qo_heads: int,
                      num_kv_heads: int, head_dim: int, page_size: int, workspace: torch.Tensor) -> None:
    """Writes the device plan of this page table into `workspace` (the decode wrapper's plan())."""
    if _eager(kv_indptr, kv_indices, kv_last_page_len, workspace):
        _launch_paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads,
                                  head_dim, page_size, workspace)
    else:
        _paged_decode_plan(kv_indptr, kv_indices, kv_last_page_len, dtype, num_qo_heads, num_kv_heads, head_dim,
                           page_size, workspace)


@torch.library.custom_op("kindex::paged_decode", mutates_args=())
def _paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor,
                  kv_indices: torch.Tensor, kv_last_page_len: Optional[torch.Tensor],
                  sm_scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
    _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse)
    return out, lse


@_paged_decode.register_fake
def _(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale):
    check_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, meta=True)
    return torch.empty_like(q), q.new_empty(q.shape[:2], dtype=torch.float32)


# Destination passing: out and lse written in place; workspace (the decode wrapper's buffer) or None for the
# cached one.
@torch.library.custom_op("kindex::paged_decode_out", mutates_args=("out", "lse", "workspace"))
def _paged_decode_out(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor,
                      kv_indices: torch.Tensor, kv_last_page_len: Optional[torch.Tensor], sm_scale: float,
                      out: torch.Tensor, lse: Optional[torch.Tensor], workspace: Optional[torch.Tensor]) -> None:
    _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                         workspace)


@_paged_decode_out.register_fake
def _(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse, workspace):
    check_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, meta=True)


# The run alone, on the plan paged_decode_plan wrote into `workspace` (the decode wrapper's run()).
@torch.library.custom_op("kindex::paged_decode_run_out", mutates_args=("out", "lse"))
def _paged_decode_run_out(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor,
                          kv_indices: torch.Tensor, kv_last_page_len: Optional[torch.Tensor], sm_scale: float,
                          out: torch.Tensor, lse: Optional[torch.Tensor], workspace: torch.Tensor) -> None:
    _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                         workspace, fn="kindex.BatchDecodeWithPagedKVCacheWrapper.run", entry="paged_decode_run")


@_paged_decode_run_out.register_fake
def _(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse, workspace):
    check_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, meta=True)


def paged_decode_run_into(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale: float, out, lse,
                          workspace) -> None:
    """The run on a plan in `workspace`, destination passing: for callers that own out, lse and the workspace and
    planned into it (the decode wrapper)."""
    if _eager(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse, workspace):
        _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                             workspace, fn="kindex.BatchDecodeWithPagedKVCacheWrapper.run", entry="paged_decode_run")
    else:
        _paged_decode_run_out(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale, out, lse,
                              workspace)


def paged_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor,
                 kv_indices: torch.Tensor, kv_last_page_len: Optional[torch.Tensor] = None,
                 sm_scale: Optional[float] = None, out: Optional[torch.Tensor] = None,
                 lse: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Batched GQA decode over a paged KV cache (FlashInfer-Bench gqa_paged_decode_*).

    q [batch_size, num_qo_heads, head_dim] bf16/fp16; k_cache, v_cache [num_pages, page_size, num_kv_heads,
    head_dim] (NHD) of q's dtype; kv_indptr [batch_size + 1], kv_indices [num_kv_indices] (== kv_indptr[-1]),
    kv_last_page_len [batch_size] (None: every last page is full), all int32; sm_scale defaults to
    1/sqrt(head_dim). Returns (output, lse): output like q, lse [batch_size, num_qo_heads] fp32, the base-2
    log-sum-exp of sm_scale * q.k (the definitions' and FlashInfer's convention). `out` / `lse`, when given,
    are written in place and returned. All tensors on one CUDA device, contiguous.
    """
    if sm_scale is None:  # (a q without a head_dim is reported by the checks, not here)
        sm_scale = 1.0 / math.sqrt(q.shape[-1]) if hasattr(q, "shape") and len(q.shape) else 1.0
    if type(sm_scale) is float and math.isfinite(sm_scale):
        scale = sm_scale
    else:
        scale = check_scale("kindex.paged_decode", "sm_scale", sm_scale)
    if _eager(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse):
        # Checked before anything is allocated, so a bad argument is reported as such.
        sizes = _decode_sizes(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out, lse,
                              "kindex.paged_decode")
        if out is None:
            out = torch.empty_like(q)
        if lse is None:
            lse = torch.empty((sizes["batch_size"], sizes["num_qo_heads"]), dtype=torch.float32, device=q.device)
        _launch_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, scale, out, lse,
                             sizes=sizes)
        return out, lse
    if out is None and lse is None:
        return _paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, scale)
    if out is None:
        out = torch.empty_like(q)
    if lse is None:
        lse = torch.empty(tuple(q.shape[:2]), dtype=torch.float32, device=q.device)
    _paged_decode_out(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, scale, out, lse, None)
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
