"""kindex's FlashInfer peer: FlashInfer's BatchDecodeWithPagedKVCacheWrapper as a FlashInfer-Bench solution of a
gqa_paged_decode definition (destination passing style), run by kindex's solution worker.

`plan` (called by the worker once per round, untimed, its host time recorded) builds the wrapper's schedule from
the page table, as a serving engine does once per batch; `run` (timed) is the wrapper's run() alone.
kindex_peer_config.py, written by kindex for the definition, names the arguments and the kernel variant.
"""
import flashinfer
import torch

from .kindex_peer_config import INPUTS, OUTPUTS, USE_TENSOR_CORES

_state = {}


def _named(args):
    return dict(zip(INPUTS + OUTPUTS, args))


def plan(*args):
    a = _named(args)
    q, k_cache = a["q"], a["k_cache"]
    if "workspace" not in _state:  # FlashInfer's recommended 128 MB, kept for every later plan
        _state["workspace"] = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=q.device)
    # backend fa2, as benchmarks/gpu/torch_decode_baselines.py measures it (the carried FlashInfer build is cut to
    # that path)
    wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(_state["workspace"], "NHD",
                                                            use_tensor_cores=USE_TENSOR_CORES, backend="fa2")
    batch, page_size = q.shape[0], k_cache.shape[1]
    last_page_len = a.get("kv_last_page_len")
    if last_page_len is None:  # definitions without it: every last page is full
        last_page_len = torch.full((batch,), page_size, dtype=torch.int32, device=q.device)
    wrapper.plan(a["kv_indptr"], a["kv_indices"], last_page_len, q.shape[1], k_cache.shape[2], q.shape[2], page_size,
                 q_data_type=q.dtype, kv_data_type=k_cache.dtype, sm_scale=float(a["sm_scale"]))
    _state["wrapper"] = wrapper


def run(*args):
    a = _named(args)
    out, lse = _state["wrapper"].run(a["q"], (a["k_cache"], a["v_cache"]), out=a["output"], lse=a["lse"],
                                     return_lse=True)
    if out.data_ptr() != a["output"].data_ptr():
        a["output"].copy_(out)
    if lse.data_ptr() != a["lse"].data_ptr():
        a["lse"].copy_(lse)
