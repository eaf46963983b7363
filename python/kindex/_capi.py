"""libkindex.so's C ABI (include/kindex/kindex.h) through ctypes.

No torch here: this module loads the library, mirrors its params structs and turns a failed status into a
KindexError carrying kindex_last_error()'s message, which names the field and value.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

# kindex_dtype
DTYPE_BF16 = 0
DTYPE_FP16 = 1

# kindex_kv_format, kindex_kv_layout, kindex_pos_encoding (struct version 2)
KV_FORMAT_SAME_AS_Q = 0
KV_FORMAT_FP8_E4M3 = 1
KV_FORMAT_FP8_E5M2 = 2
KV_LAYOUT_NHD = 0
KV_LAYOUT_HND = 1
POS_ENCODING_NONE = 0
POS_ENCODING_ROPE_LLAMA = 1

# kindex_status
STATUS_OK = 0
STATUS_NAMES = {
    0: "KINDEX_STATUS_OK",
    1: "KINDEX_STATUS_INVALID_ARGUMENT",
    2: "KINDEX_STATUS_NOT_SUPPORTED",
    3: "KINDEX_STATUS_WORKSPACE_TOO_SMALL",
    4: "KINDEX_STATUS_CUDA_ERROR",
    5: "KINDEX_STATUS_INVALID_INPUT",
}

LIBRARY_ENV = "KINDEX_LIBRARY"


class KindexError(RuntimeError):
    """A libkindex call failed; `status` is the kindex_status name, the message names the field and value."""

    def __init__(self, status: int, message: str):
        self.status = STATUS_NAMES.get(status, f"status {status}")
        super().__init__(f"{message} [{self.status}]")


class PagedDecodeParams(ctypes.Structure):
    """kindex_paged_decode_params, field for field."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dtype", ctypes.c_int),
        ("batch_size", ctypes.c_int32),
        ("num_qo_heads", ctypes.c_int32),
        ("num_kv_heads", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("page_size", ctypes.c_int32),
        ("num_pages", ctypes.c_int64),
        ("num_kv_indices", ctypes.c_int64),
        ("q", ctypes.c_void_p),
        ("k_cache", ctypes.c_void_p),
        ("v_cache", ctypes.c_void_p),
        ("kv_indptr", ctypes.c_void_p),
        ("kv_indices", ctypes.c_void_p),
        ("kv_last_page_len", ctypes.c_void_p),
        ("sm_scale", ctypes.c_float),
        ("output", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("validate", ctypes.c_int32),
        # version 2 (kindex.h): FlashInfer's decode variants
        ("kv_format", ctypes.c_int),
        ("kv_layout", ctypes.c_int),
        ("k_scale", ctypes.c_float),
        ("v_scale", ctypes.c_float),
        ("q_len_per_req", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("logits_soft_cap", ctypes.c_float),
        ("sinks", ctypes.c_void_p),
        ("pos_encoding", ctypes.c_int),
        ("rope_scale", ctypes.c_float),
        ("rope_theta", ctypes.c_float),
    ]

    # KINDEX_PAGED_DECODE_PARAMS_INIT's non-zero defaults
    DEFAULTS = dict(k_scale=1.0, v_scale=1.0, q_len_per_req=1, window_left=-1, rope_scale=1.0, rope_theta=1e4)

    def __init__(self, **fields):
        super().__init__(struct_size=ctypes.sizeof(PagedDecodeParams), **{**self.DEFAULTS, **fields})


GQA_ROPE_BACKWARD_INPUTS = (
    "grad_output", "hidden_states", "cos", "sin", "q_weight", "k_weight", "v_weight", "o_weight",
    "query_states", "key_states", "value_states", "attn_weights", "attn_output",
)
GQA_ROPE_BACKWARD_OUTPUTS = (
    "grad_hidden_states", "grad_q_weight", "grad_k_weight", "grad_v_weight", "grad_o_weight",
)


class GqaRopeBackwardParams(ctypes.Structure):
    """kindex_gqa_rope_backward_params, field for field."""

    _fields_ = (
        [("struct_size", ctypes.c_uint32), ("batch_size", ctypes.c_int32), ("seq_len", ctypes.c_int32)]
        + [(name, ctypes.c_void_p) for name in GQA_ROPE_BACKWARD_INPUTS]
        + [("scaling", ctypes.c_float)]
        + [(name, ctypes.c_void_p) for name in GQA_ROPE_BACKWARD_OUTPUTS]
    )

    def __init__(self, **fields):
        super().__init__(struct_size=ctypes.sizeof(GqaRopeBackwardParams), **fields)


_lock = threading.Lock()
_library: ctypes.CDLL | None = None


def library_path() -> Path:
    """$KINDEX_LIBRARY if set, else the libkindex.so installed beside this module."""
    override = os.environ.get(LIBRARY_ENV)
    return Path(override) if override else Path(__file__).with_name("libkindex.so")


def library() -> ctypes.CDLL:
    """Loads libkindex.so on first use (not at import, so `import kindex` works where it cannot load)."""
    global _library
    with _lock:
        if _library is None:
            path = library_path()
            if not path.is_file():
                where = f"${LIBRARY_ENV}" if os.environ.get(LIBRARY_ENV) else "the kindex package"
                raise KindexError(
                    2, f"kindex: no libkindex.so at {path} (from {where}); reinstall kindex with pip, or set "
                       f"{LIBRARY_ENV} to a libkindex.so")
            lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
            lib.kindex_last_error.restype = ctypes.c_char_p
            lib.kindex_last_error.argtypes = []
            lib.kindex_version.restype = ctypes.c_char_p
            lib.kindex_version.argtypes = []
            for name, params in (("paged_decode", PagedDecodeParams),
                                 ("gqa_rope_backward", GqaRopeBackwardParams)):
                size = getattr(lib, f"kindex_{name}_workspace_size")
                size.restype = ctypes.c_int
                size.argtypes = [ctypes.POINTER(params), ctypes.POINTER(ctypes.c_size_t)]
                entries = [f"kindex_{name}"]
                if name == "paged_decode":  # plan once per batch step, run per layer
                    entries += [f"kindex_{name}_plan", f"kindex_{name}_run"]
                for entry in entries:
                    run = getattr(lib, entry)
                    run.restype = ctypes.c_int
                    run.argtypes = [ctypes.POINTER(params), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
            _library = lib
        return _library


_version: str | None = None


def version() -> str:
    """libkindex's version: "0.1.0+cuda", or "0.1.0+nocuda" for a build without CUDA."""
    global _version
    if _version is None:
        _version = library().kindex_version().decode()
    return _version


def has_cuda() -> bool:
    return version().endswith("+cuda")


def _check(lib: ctypes.CDLL, status: int) -> None:
    if status != STATUS_OK:
        raise KindexError(status, lib.kindex_last_error().decode(errors="replace"))


def workspace_size(name: str, params: ctypes.Structure) -> int:
    """Bytes of workspace kindex_<name> needs for `params` (name: paged_decode or gqa_rope_backward)."""
    lib = library()
    nbytes = ctypes.c_size_t(0)
    _check(lib, getattr(lib, f"kindex_{name}_workspace_size")(ctypes.byref(params), ctypes.byref(nbytes)))
    return nbytes.value


def launch(name: str, params: ctypes.Structure, workspace: int, workspace_bytes: int, stream: int) -> None:
    """Enqueues kindex_<name> on `stream` (a cudaStream_t as an integer; name: paged_decode, paged_decode_plan,
    paged_decode_run or gqa_rope_backward); never synchronises."""
    lib = library()
    _check(lib, getattr(lib, f"kindex_{name}")(ctypes.byref(params), ctypes.c_void_p(workspace or None),
                                               ctypes.c_size_t(workspace_bytes), ctypes.c_void_p(stream or None)))
