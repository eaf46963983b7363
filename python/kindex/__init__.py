"""kindex: paged GQA decode and the GQA-with-RoPE attention backward, as torch ops over libkindex.so.

    import kindex
    out, lse = kindex.paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len)

`import kindex` needs neither a GPU nor PyTorch: the ops load torch on first use (and register as
torch.ops.kindex.*), libkindex.so loads on the first call that needs it, and a machine without CUDA gets its
error when a kernel is called, naming why.
"""

from ._capi import KindexError, has_cuda, library_path, version

__version__ = "0.1.0"

# The names that need torch, and the module each lives in (imported on first access, PEP 562).
_TORCH_NAMES = {
    "paged_decode": "ops",
    "gqa_rope_backward": "ops",
    "BatchDecodeWithPagedKVCacheWrapper": "decode_wrapper",
}

__all__ = ["KindexError", "version", "has_cuda", "library_path", *_TORCH_NAMES]


def __getattr__(name):
    module = _TORCH_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'kindex' has no attribute {name!r}")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ImportError(f"kindex.{name} needs PyTorch (import torch failed: {e})") from e
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
