"""Argument checks of kindex's ops, before anything reaches libkindex.

Written against what a tensor shows (shape, dtype, device, is_contiguous), not against torch itself, so the
same checks run on real tensors, on torch.compile's fake tensors (at trace time) and, in the CPU tests, on
plain stand-ins without torch installed. Every message names the function, the argument and what it got.
Structure (dtype, rank, shape, contiguity) is checked before the device, so a mistake in a call made on the
wrong device is still reported for what it is.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, Sequence

from . import _capi

DECODE_DTYPES = ("bfloat16", "float16")
DECODE_HEAD_DIMS = (64, 128, 256)
DECODE_MAX_PAGE_SIZE = 128
DECODE_MAX_GROUP = 16
DECODE_MAX_Q_LEN = 8
# kindex.h's enums by the names callers use (torch dtype names, FlashInfer's strings)
DECODE_FP8_KV_FORMATS = {"float8_e4m3fn": _capi.KV_FORMAT_FP8_E4M3, "float8_e5m2": _capi.KV_FORMAT_FP8_E5M2}
DECODE_KV_LAYOUTS = {"NHD": _capi.KV_LAYOUT_NHD, "HND": _capi.KV_LAYOUT_HND}
DECODE_POS_ENCODINGS = {"NONE": _capi.POS_ENCODING_NONE, "ROPE_LLAMA": _capi.POS_ENCODING_ROPE_LLAMA}
# a cache's shape in each layout, as the messages spell it
DECODE_LAYOUT_SHAPES = {"NHD": "[num_pages, page_size, num_kv_heads, head_dim] (NHD)",
                        "HND": "[num_pages, num_kv_heads, page_size, head_dim] (HND)"}

# SOL-ExecBench L2/003: fixed by the definition.
BACKWARD_HIDDEN = 5120
BACKWARD_QO_HEADS = 32
BACKWARD_KV_HEADS = 8
BACKWARD_HEAD_DIM = 128


def dtype_name(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _shape(t: Any) -> tuple:
    return tuple(t.shape)


def _fmt(shape: Iterable) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


class Checker:
    """Collects the checks of one call; `fn` prefixes every message."""

    def __init__(self, fn: str):
        self.fn = fn

    def fail(self, arg: str, problem: str):
        raise ValueError(f"{self.fn}: {arg} {problem}")

    def tensor(self, arg: str, t: Any) -> None:
        if t is None or not all(hasattr(t, a) for a in ("shape", "dtype", "device", "is_contiguous")):
            self.fail(arg, f"must be a tensor, got {type(t).__name__}")

    def dtype(self, arg: str, t: Any, allowed: Sequence[str]) -> str:
        name = dtype_name(t)
        if name not in allowed:
            self.fail(arg, f"has dtype {name}; expected {' or '.join(allowed)}")
        return name

    def same_dtype(self, arg: str, t: Any, ref_arg: str, ref: Any) -> None:
        if dtype_name(t) != dtype_name(ref):
            self.fail(arg, f"has dtype {dtype_name(t)}; expected {dtype_name(ref)}, the dtype of {ref_arg}")

    def rank(self, arg: str, t: Any, rank: int, layout: str) -> tuple:
        shape = _shape(t)
        if len(shape) != rank:
            self.fail(arg, f"has shape {_fmt(shape)}; expected {rank} dimensions {layout}")
        return shape

    def dim(self, arg: str, t: Any, index: int, expected: int, what: str) -> None:
        got = _shape(t)[index]
        if got != expected:
            self.fail(arg, f"has shape {_fmt(_shape(t))}; dimension {index} must be {expected} ({what})")

    def shape(self, arg: str, t: Any, expected: Sequence, layout: str) -> None:
        got = _shape(t)
        if len(got) != len(expected) or any(g != e for g, e in zip(got, expected)):
            self.fail(arg, f"has shape {_fmt(got)}; expected {_fmt(expected)} {layout}")

    def contiguous(self, arg: str, t: Any) -> None:
        if not t.is_contiguous():
            self.fail(arg, f"is not contiguous (strides {tuple(t.stride()) if hasattr(t, 'stride') else '?'}); "
                           "kindex reads dense row-major tensors: pass .contiguous()")

    def devices(self, args: Sequence[tuple[str, Any]], meta: bool = False) -> None:
        """Every tensor on one CUDA device (or, for shape inference only, all on the meta device)."""
        first_arg, first = args[0]
        for arg, t in args:
            if t.device.type != "cuda" and not (meta and t.device.type == "meta"):
                self.fail(arg, f"is on {t.device}; kindex's kernels run on CUDA devices only"
                               + _cuda_hint())
        for arg, t in args[1:]:
            if t.device != first.device:
                self.fail(arg, f"is on {t.device}; expected {first.device}, the device of {first_arg}")


def _cuda_hint() -> str:
    try:
        import torch
    except ImportError:
        return ""
    if not torch.cuda.is_available():
        return " (torch.cuda.is_available() is False on this machine)"
    return ""


def check_paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, out=None, lse=None,
                       fn: str = "kindex.paged_decode", meta: bool = False, sinks=None, kv_layout: int = 0,
                       q_len_per_req: int = 1) -> dict:
    """Checks one paged decode call; returns its sizes (batch_size, heads, head_dim, page_size, num_pages,
    num_kv_indices) and kv_format for the C ABI's params. meta: the ops' fake implementations also take meta
    tensors. kv_layout (kindex_kv_layout) and q_len_per_req as decode_variant gives them: they shape the tensors."""
    c = Checker(fn)
    named = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("kv_indptr", kv_indptr),
             ("kv_indices", kv_indices)]
    for arg, t in (("kv_last_page_len", kv_last_page_len), ("out", out), ("lse", lse), ("sinks", sinks)):
        if t is not None:
            named.append((arg, t))
    for arg, t in named:
        c.tensor(arg, t)

    q_dtype = c.dtype("q", q, DECODE_DTYPES)
    kv_dtype = dtype_name(k_cache)
    if kv_dtype != q_dtype and kv_dtype not in DECODE_FP8_KV_FORMATS:
        c.fail("k_cache", f"has dtype {kv_dtype}; expected {q_dtype} (the dtype of q), "
                          f"{' or '.join(DECODE_FP8_KV_FORMATS)}")
    c.same_dtype("v_cache", v_cache, "k_cache", k_cache)
    for arg in ("kv_indptr", "kv_indices", "kv_last_page_len"):
        t = dict(named).get(arg)
        if t is not None:
            c.dtype(arg, t, ("int32",))

    rows, num_qo_heads, head_dim = c.rank("q", q, 3, "[batch_size * q_len_per_req, num_qo_heads, head_dim]"
                                          if q_len_per_req > 1 else "[batch_size, num_qo_heads, head_dim]")
    if rows % q_len_per_req:
        c.fail("q", f"has {rows} rows; expected a multiple of q_len_per_req = {q_len_per_req} "
                    "([batch_size * q_len_per_req, num_qo_heads, head_dim])")
    batch_size = rows // q_len_per_req
    kv_layout = "HND" if kv_layout == DECODE_KV_LAYOUTS["HND"] else "NHD"
    layout = DECODE_LAYOUT_SHAPES[kv_layout]
    if kv_layout == "NHD":
        num_pages, page_size, num_kv_heads, kv_head_dim = c.rank("k_cache", k_cache, 4, layout)
    else:
        num_pages, num_kv_heads, page_size, kv_head_dim = c.rank("k_cache", k_cache, 4, layout)
    page_dim = 1 if kv_layout == "NHD" else 2
    c.shape("v_cache", v_cache, _shape(k_cache), "(the shape of k_cache)")
    if kv_head_dim != head_dim:
        c.fail("k_cache", f"has shape {_fmt(_shape(k_cache))}; dimension 3 must be {head_dim} "
                          "(head_dim, from q)")
    if head_dim not in DECODE_HEAD_DIMS:
        c.fail("q", f"has head_dim {head_dim}; kindex supports head_dim 64, 128 or 256")
    if not 1 <= page_size <= DECODE_MAX_PAGE_SIZE:
        c.fail("k_cache", f"has page_size {page_size} (dimension {page_dim}, {kv_layout}); kindex supports 1 to "
                          f"{DECODE_MAX_PAGE_SIZE}")
    if num_kv_heads < 1 or num_qo_heads % num_kv_heads != 0:
        c.fail("q", f"has {num_qo_heads} heads; expected a multiple of num_kv_heads = {num_kv_heads} (k_cache)")
    if num_qo_heads // num_kv_heads > DECODE_MAX_GROUP:
        c.fail("q", f"has {num_qo_heads} heads for {num_kv_heads} KV heads; kindex supports group sizes up to "
                    f"{DECODE_MAX_GROUP}")
    c.shape("kv_indptr", kv_indptr, (batch_size + 1,), "(batch_size + 1, from q)")
    (num_kv_indices,) = c.rank("kv_indices", kv_indices, 1, "[num_kv_indices]")
    if kv_last_page_len is not None:
        c.shape("kv_last_page_len", kv_last_page_len, (batch_size,), "(batch_size, from q)")
    if out is not None:
        c.same_dtype("out", out, "q", q)
        c.shape("out", out, _shape(q), "(the shape of q)")
    if lse is not None:
        c.dtype("lse", lse, ("float32",))
        c.shape("lse", lse, (rows, num_qo_heads), "[batch_size * q_len_per_req, num_qo_heads]" if q_len_per_req > 1
                else "[batch_size, num_qo_heads]")
    if sinks is not None:
        c.dtype("sinks", sinks, ("float32",))
        c.shape("sinks", sinks, (num_qo_heads,), "[num_qo_heads] (from q)")
    for arg, t in named:
        c.contiguous(arg, t)
    c.devices(named, meta)
    return dict(batch_size=batch_size, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                page_size=page_size, num_pages=num_pages, num_kv_indices=num_kv_indices,
                kv_format=DECODE_FP8_KV_FORMATS.get(kv_dtype, _capi.KV_FORMAT_SAME_AS_Q))


def check_positive(fn: str, arg: str, value: Any, default: float) -> float:
    """A finite, positive host number (None: `default`)."""
    if value is None:
        return default
    v = check_scale(fn, arg, value)
    if not v > 0:
        raise ValueError(f"{fn}: {arg} = {v}: must be > 0")
    return v


def _integer(fn: str, arg: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ValueError(f"{fn}: {arg} = {value!r}: expected an int")
    return operator.index(value)


def decode_variant(fn: str, kv_layout: str = "NHD", k_scale: Any = None, v_scale: Any = None,
                   q_len_per_req: Any = 1, window_left: Any = -1, logits_soft_cap: Any = None,
                   pos_encoding_mode: str = "NONE", rope_scale: Any = None, rope_theta: Any = None) -> dict:
    """FlashInfer's decode options (its names, defaults and None conventions) as the C ABI's version-2 fields
    (kindex.h), each checked against the range the header gives it; what the kernels run is the library's to say."""
    if kv_layout not in DECODE_KV_LAYOUTS:
        raise ValueError(f"{fn}: kv_layout = {kv_layout!r}: expected 'NHD' or 'HND'")
    if pos_encoding_mode not in DECODE_POS_ENCODINGS:
        if pos_encoding_mode == "ALIBI":
            raise NotImplementedError(f"{fn}: pos_encoding_mode = 'ALIBI': kindex has no ALiBi (its C ABI takes "
                                      "NONE or ROPE_LLAMA)")
        raise ValueError(f"{fn}: pos_encoding_mode = {pos_encoding_mode!r}: expected 'NONE' or 'ROPE_LLAMA'")
    q_len = _integer(fn, "q_len_per_req", q_len_per_req)
    if not 1 <= q_len <= DECODE_MAX_Q_LEN:
        raise ValueError(f"{fn}: q_len_per_req = {q_len}: must be in [1, {DECODE_MAX_Q_LEN}]")
    window = _integer(fn, "window_left", window_left)
    if window < -1:
        raise ValueError(f"{fn}: window_left = {window}: must be >= 0, or -1 for no window")
    cap = 0.0 if logits_soft_cap is None else check_scale(fn, "logits_soft_cap", logits_soft_cap)
    if cap < 0:
        raise ValueError(f"{fn}: logits_soft_cap = {cap}: must be > 0, or 0 / None for no soft-cap")
    return dict(kv_layout=DECODE_KV_LAYOUTS[kv_layout], k_scale=check_positive(fn, "k_scale", k_scale, 1.0),
                v_scale=check_positive(fn, "v_scale", v_scale, 1.0), q_len_per_req=q_len, window_left=window,
                logits_soft_cap=cap, pos_encoding=DECODE_POS_ENCODINGS[pos_encoding_mode],
                rope_scale=check_positive(fn, "rope_scale", rope_scale, 1.0),
                rope_theta=check_positive(fn, "rope_theta", rope_theta, 1e4))


def gqa_rope_backward_shapes(batch_size: int, seq_len: int) -> dict:
    """Each tensor's shape in SOL-ExecBench L2/003, by its definition name."""
    b, s, h = batch_size, seq_len, BACKWARD_HIDDEN
    q_proj, kv_proj = BACKWARD_QO_HEADS * BACKWARD_HEAD_DIM, BACKWARD_KV_HEADS * BACKWARD_HEAD_DIM
    states = (b, BACKWARD_QO_HEADS, s, BACKWARD_HEAD_DIM)
    return {
        "grad_output": (b, s, h), "hidden_states": (b, s, h),
        "cos": (b, s, BACKWARD_HEAD_DIM), "sin": (b, s, BACKWARD_HEAD_DIM),
        "q_weight": (q_proj, h), "k_weight": (kv_proj, h), "v_weight": (kv_proj, h), "o_weight": (h, q_proj),
        "query_states": states, "key_states": states, "value_states": states,
        "attn_weights": (b, BACKWARD_QO_HEADS, s, s), "attn_output": (b, s, q_proj),
        "grad_hidden_states": (b, s, h),
        "grad_q_weight": (q_proj, h), "grad_k_weight": (kv_proj, h), "grad_v_weight": (kv_proj, h),
        "grad_o_weight": (h, q_proj),
    }


def check_gqa_rope_backward(tensors: dict, fn: str = "kindex.gqa_rope_backward", meta: bool = False) -> tuple:
    """Checks the 13 inputs of L2/003 (by definition name, in definition order); returns (batch_size, seq_len)."""
    c = Checker(fn)
    for arg, t in tensors.items():
        c.tensor(arg, t)
    for arg, t in tensors.items():
        c.dtype(arg, t, ("bfloat16",))
    batch_size, seq_len, _ = c.rank("hidden_states", tensors["hidden_states"], 3,
                                    "[batch_size, seq_len, hidden_size]")
    expected = gqa_rope_backward_shapes(batch_size, seq_len)
    for arg, t in tensors.items():
        c.shape(arg, t, expected[arg], "(SOL-ExecBench L2/003, batch_size and seq_len from hidden_states)")
    for arg, t in tensors.items():
        c.contiguous(arg, t)
    c.devices(list(tensors.items()), meta)
    return batch_size, seq_len


def check_scale(fn: str, arg: str, value: Any) -> float:
    """A softmax scale given as a number or a CPU scalar tensor (a CUDA one would need a host sync)."""
    if value is None:
        raise ValueError(f"{fn}: {arg} is required")
    if hasattr(value, "device") and hasattr(value, "item"):
        if value.device.type != "cpu":
            raise ValueError(f"{fn}: {arg} is a tensor on {value.device}; pass a Python float or a CPU scalar "
                             "(reading a device scalar would synchronise the stream)")
        if tuple(value.shape) not in ((), (1,)):
            raise ValueError(f"{fn}: {arg} has shape {_fmt(value.shape)}; expected a scalar")
        value = value.item()
    try:
        scale = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{fn}: {arg} = {value!r}: expected a float") from None
    if scale != scale or scale in (float("inf"), float("-inf")):
        raise ValueError(f"{fn}: {arg} = {scale}: must be finite")
    return scale
